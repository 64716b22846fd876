package pool

import (
	"runtime"
	"sync"
	"testing"
)

// Objects put back before two collections are the ones Get hands out after them, up to the
// capacity; beyond it Get makes new ones.
func TestFreeListSurvivesCollections(t *testing.T) {
	type obj struct{ _ [64]byte }
	made := 0
	l := NewFreeList(4, func() *obj { made++; return new(obj) })
	var held [6]*obj
	for i := range held {
		held[i] = l.Get()
	}
	if made != 6 {
		t.Fatalf("made %d objects for 6 Gets of an empty list, want 6", made)
	}
	mine := map[*obj]bool{}
	for _, o := range held {
		mine[o] = true
		l.Put(o)
	}
	if l.Len() != 4 {
		t.Fatalf("Len after 6 Puts into a list of 4: %d, want 4", l.Len())
	}
	for round := range 3 {
		runtime.GC()
		runtime.GC()
		for i := range 4 {
			if held[i] = l.Get(); !mine[held[i]] {
				t.Fatalf("round %d: Get %d made a new object", round, i)
			}
		}
		if made != 6 {
			t.Fatalf("round %d: %d objects made, want still 6", round, made)
		}
		for _, o := range held[:4] {
			l.Put(o)
		}
	}
	if o := l.Get(); o == nil {
		t.Fatal("Get returned nil")
	}
}

func TestFreeListConcurrent(t *testing.T) {
	l := NewFreeList[int](8, nil)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				v := l.Get()
				*v = g*1000 + i
				if *v != g*1000+i {
					t.Errorf("object shared between goroutines")
					return
				}
				*v = 0
				l.Put(v)
			}
		}()
	}
	wg.Wait()
	if n := l.Len(); n < 1 || n > 8 {
		t.Fatalf("Len %d, want 1..8", n)
	}
}

func TestFreeListCapacity(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("NewFreeList(0) did not panic")
		}
	}()
	NewFreeList[int](0, nil)
}
