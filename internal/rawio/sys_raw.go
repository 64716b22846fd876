//go:build !race

package rawio

import (
	"syscall"
	"unsafe"
)

// The calls themselves: raw, so that the runtime is not told (see the package comment).

func sysRead(fd uintptr, b []byte) (int, syscall.Errno) {
	r, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)))
	return int(r), e
}

func sysWrite(fd uintptr, b []byte) (int, syscall.Errno) {
	r, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)))
	return int(r), e
}

func sysWritev(fd uintptr, iov []syscall.Iovec) (int, syscall.Errno) {
	r, _, e := syscall.RawSyscall(syscall.SYS_WRITEV, fd, uintptr(unsafe.Pointer(unsafe.SliceData(iov))), uintptr(len(iov)))
	return int(r), e
}
