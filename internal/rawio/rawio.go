// Package rawio reads and writes TCP and unix sockets with system calls the Go scheduler is
// not told about.
//
// A socket of the net package is non-blocking: a read or write either moves bytes at once or
// fails with EAGAIN, after which the goroutine parks in the network poller. Yet every such call
// goes through the runtime's system-call entry, and the first one after the process went idle
// wakes the runtime's monitor thread (sysmon), which then polls every 20 µs until every P is
// idle again. At a few hundred requests a second that monitor is a large part of what a request
// costs (docs/benchmarks.md, "Where the CPU goes at low rates"). A call that cannot block needs
// none of it: Conn issues read, write and writev as raw system calls inside the socket's
// syscall.RawConn, which still parks the goroutine in the poller on EAGAIN and still honours
// deadlines and Close.
package rawio

import (
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// enabled is the process-wide switch (SetEnabled); Wrap and Listener return their argument
// unchanged while it is off.
var enabled atomic.Bool

func init() { enabled.Store(true) }

// SetEnabled turns raw system calls on or off for connections wrapped from now on.
func SetEnabled(on bool) { enabled.Store(on) }

// Enabled reports whether Wrap wraps.
func Enabled() bool { return enabled.Load() }

// maxIov is the most buffers one writev takes (Linux's UIO_MAXIOV).
const maxIov = 1024

// Conn is a TCP or unix socket whose Read, Write and WriteBuffers use raw system calls. Its
// other methods are the socket's. Read and Write may run concurrently with each other, each
// direction serialized by its own lock, as on the socket.
type Conn struct {
	net.Conn
	rc syscall.RawConn

	rmu   sync.Mutex
	rbuf  []byte
	rn    int
	rerr  syscall.Errno
	rfunc func(uintptr) bool
	// ReadPooled's: the pool's two ends, and the buffer taken for the read under way.
	rget  func() *[]byte
	rput  func(*[]byte)
	rpool *[]byte

	wmu    sync.Mutex
	wbuf   []byte
	wn     int
	werr   syscall.Errno
	wfunc  func(uintptr) bool
	wvbufs [][]byte
	iov    []syscall.Iovec
	wvfunc func(uintptr) bool
}

// Wrap returns nc as a Conn when it is a *net.TCPConn or *net.UnixConn and raw calls are
// enabled, nc itself otherwise.
func Wrap(nc net.Conn) net.Conn {
	if !enabled.Load() {
		return nc
	}
	var sc syscall.Conn
	switch c := nc.(type) {
	case *net.TCPConn:
		sc = c
	case *net.UnixConn:
		sc = c
	default:
		return nc
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nc
	}
	c := &Conn{Conn: nc, rc: rc}
	c.rfunc = c.doRead
	c.wfunc = c.doWrite
	c.wvfunc = c.doWritev
	return c
}

// Unwrap returns the socket.
func (c *Conn) Unwrap() net.Conn { return c.Conn }

// doRead reads into rbuf, or with ReadPooled (rget set) into a buffer from the pool, taken
// for the try and given back when it finds nothing, before the goroutine waits.
func (c *Conn) doRead(fd uintptr) bool {
	for {
		b := c.rbuf
		if c.rget != nil {
			if c.rpool == nil {
				c.rpool = c.rget()
			}
			b = (*c.rpool)[:cap(*c.rpool)]
		}
		r, e := sysRead(fd, b)
		switch e {
		case 0:
			c.rn = r
			return true
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			if c.rpool != nil {
				c.rput(c.rpool)
				c.rpool = nil
			}
			return false
		default:
			c.rerr = e
			return true
		}
	}
}

// Read reads as the socket does: at least one byte, or io.EOF at the peer's end, or the error.
func (c *Conn) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	c.rmu.Lock()
	c.rbuf, c.rn, c.rerr = b, 0, 0
	err := c.rc.Read(c.rfunc)
	n, e := c.rn, c.rerr
	c.rbuf = nil
	c.rmu.Unlock()
	switch {
	case err != nil:
		return 0, c.opError("read", err)
	case e != 0:
		return 0, c.opError("read", os.NewSyscallError("read", e))
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// ReadPooled reads as Read does, into a buffer it takes from get only when the socket has
// bytes for it, so that a connection waiting for its peer holds no buffer: a read that finds
// nothing gives the buffer back to put before it waits. It returns the buffer, whose first n
// bytes were read, when n > 0; the caller puts it back once done with them. On an error or at
// the peer's end it returns no buffer. get and put are kept for the call only.
func (c *Conn) ReadPooled(get func() *[]byte, put func(*[]byte)) (*[]byte, int, error) {
	c.rmu.Lock()
	c.rget, c.rput, c.rn, c.rerr = get, put, 0, 0
	err := c.rc.Read(c.rfunc)
	b, n, e := c.rpool, c.rn, c.rerr
	c.rpool, c.rget, c.rput = nil, nil, nil
	c.rmu.Unlock()
	if n > 0 && err == nil && e == 0 {
		return b, n, nil
	}
	if b != nil {
		put(b)
	}
	switch {
	case err != nil:
		return nil, 0, c.opError("read", err)
	case e != 0:
		return nil, 0, c.opError("read", os.NewSyscallError("read", e))
	}
	return nil, 0, io.EOF
}

func (c *Conn) doWrite(fd uintptr) bool {
	for len(c.wbuf) > 0 {
		r, e := sysWrite(fd, c.wbuf)
		switch e {
		case 0:
			c.wn += r
			c.wbuf = c.wbuf[r:]
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			c.werr = e
			return true
		}
	}
	return true
}

// Write writes all of b or returns the error that stopped it, as the socket does.
func (c *Conn) Write(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	c.wmu.Lock()
	c.wbuf, c.wn, c.werr = b, 0, 0
	err := c.rc.Write(c.wfunc)
	n, e := c.wn, c.werr
	c.wbuf = nil
	c.wmu.Unlock()
	switch {
	case err != nil:
		return n, c.opError("write", err)
	case e != 0:
		return n, c.opError("write", os.NewSyscallError("write", e))
	}
	return n, nil
}

func (c *Conn) doWritev(fd uintptr) bool {
	for len(c.wvbufs) > 0 {
		iov := c.iov[:0]
		for _, b := range c.wvbufs {
			if len(b) == 0 {
				continue
			}
			v := syscall.Iovec{Base: unsafe.SliceData(b)}
			v.SetLen(len(b))
			iov = append(iov, v)
			if len(iov) == maxIov {
				break
			}
		}
		c.iov = iov
		if len(iov) == 0 {
			c.wvbufs = c.wvbufs[:0]
			return true
		}
		r, e := sysWritev(fd, iov)
		switch e {
		case 0:
			c.wn += r
			c.consume(r)
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			c.werr = e
			return true
		}
	}
	return true
}

// consume drops the first n bytes from wvbufs.
func (c *Conn) consume(n int) {
	for len(c.wvbufs) > 0 {
		if l := len(c.wvbufs[0]); l > n {
			c.wvbufs[0] = c.wvbufs[0][n:]
			return
		} else {
			n -= l
		}
		c.wvbufs[0] = nil
		c.wvbufs = c.wvbufs[1:]
	}
}

// WriteBuffers writes every buffer of *bufs in order with as few writev calls as the kernel
// allows, consuming *bufs as net.Buffers.WriteTo does.
func (c *Conn) WriteBuffers(bufs *net.Buffers) (int64, error) {
	c.wmu.Lock()
	if cap(c.iov) == 0 {
		c.iov = make([]syscall.Iovec, 0, 16)
	}
	c.wvbufs, c.wn, c.werr = *bufs, 0, 0
	var err error
	if len(c.wvbufs) > 0 {
		err = c.rc.Write(c.wvfunc)
	}
	*bufs = c.wvbufs
	n, e := c.wn, c.werr
	c.wvbufs = nil
	clear(c.iov[:cap(c.iov)])
	c.wmu.Unlock()
	switch {
	case err != nil:
		return int64(n), c.opError("writev", err)
	case e != 0:
		return int64(n), c.opError("writev", os.NewSyscallError("writev", e))
	}
	return int64(n), nil
}

// opError shapes err as the socket's own methods do, so that callers' errors.Is and
// net.Error checks (deadlines, net.ErrClosed) see the same chain.
func (c *Conn) opError(op string, err error) error {
	if oe, ok := err.(*net.OpError); ok {
		oe.Op = op
		return oe
	}
	return &net.OpError{Op: op, Net: c.LocalAddr().Network(), Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}

// WriteBuffers writes bufs to w: with writev from a Conn, with net.Buffers.WriteTo otherwise.
func WriteBuffers(w net.Conn, bufs *net.Buffers) (int64, error) {
	if c, ok := w.(*Conn); ok {
		return c.WriteBuffers(bufs)
	}
	return bufs.WriteTo(w)
}

// Listener wraps every connection it accepts with Wrap.
type Listener struct{ net.Listener }

// Listen returns ln wrapped so that its connections use raw calls (ln itself when disabled).
func Listen(ln net.Listener) net.Listener {
	if !enabled.Load() {
		return ln
	}
	return Listener{ln}
}

// Accept accepts the next connection and wraps it.
func (l Listener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return Wrap(nc), nil
}
