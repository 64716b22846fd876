package spool

import "runtime"

func runtimeGosched() { runtime.Gosched() }
