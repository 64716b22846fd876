//go:build race

package rawio

import (
	"syscall"
	"unsafe"
)

// Under the race detector the calls go through package syscall, whose Read and Write tell the
// detector that bytes written to a descriptor happen before the reads that see them. Without
// that, a test that sets a variable, then sends a request over a socket that the handler reads
// the variable after, would be reported as a race the raw calls only hide from the detector.
// The Conn around the calls is the same; only the scheduler's bookkeeping differs.

func sysRead(fd uintptr, b []byte) (int, syscall.Errno) {
	n, err := syscall.Read(int(fd), b)
	return n, errno(err)
}

func sysWrite(fd uintptr, b []byte) (int, syscall.Errno) {
	n, err := syscall.Write(int(fd), b)
	return n, errno(err)
}

// sysWritev writes the vector's buffers one write each, as far as the first short write.
func sysWritev(fd uintptr, iov []syscall.Iovec) (int, syscall.Errno) {
	total := 0
	for _, v := range iov {
		b := unsafe.Slice(v.Base, v.Len)
		n, err := syscall.Write(int(fd), b)
		if err != nil {
			if total > 0 {
				return total, 0
			}
			return 0, errno(err)
		}
		total += n
		if n < len(b) {
			break
		}
	}
	return total, 0
}

func errno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	if e, ok := err.(syscall.Errno); ok {
		return e
	}
	return syscall.EIO
}
