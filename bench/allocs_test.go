package bench

import (
	"testing"

	"github.com/google/pprof/profile"
)

func TestSplitAllocs(t *testing.T) {
	fn := func(id uint64, name string) *profile.Function { return &profile.Function{ID: id, Name: name} }
	own := fn(1, "github.com/otlpgate/otlpgate/fastpath.(*Pipeline).admit")
	grpc := fn(2, "google.golang.org/grpc.(*Server).processUnaryRPC")
	makeslice := fn(3, "runtime.makeslice")
	newproc := fn(4, "runtime.newproc1")
	loc := func(id uint64, fs ...*profile.Function) *profile.Location {
		l := &profile.Location{ID: id}
		for _, f := range fs {
			l.Line = append(l.Line, profile.Line{Function: f})
		}
		return l
	}
	lOwn, lGRPC, lMake, lProc := loc(1, own), loc(2, grpc), loc(3, makeslice), loc(4, newproc)
	mk := func(ownN, grpcN, runtimeN int64) *profile.Profile {
		return &profile.Profile{
			SampleType: []*profile.ValueType{{Type: "alloc_objects", Unit: "count"}, {Type: "alloc_space", Unit: "bytes"}},
			Sample: []*profile.Sample{
				// makeslice allocates for its caller: otlpgate's.
				{Location: []*profile.Location{lMake, lOwn, lGRPC}, Value: []int64{ownN, 0}},
				{Location: []*profile.Location{lMake, lGRPC}, Value: []int64{grpcN, 0}},
				// Only runtime frames: other.
				{Location: []*profile.Location{lProc}, Value: []int64{runtimeN, 0}},
			},
		}
	}
	s, err := SplitAllocs(mk(10, 100, 5), mk(30, 400, 25))
	if err != nil {
		t.Fatal(err)
	}
	if s.Own != 20 || s.Other != 320 {
		t.Fatalf("split %+v, want own 20, other 320 (300 grpc + 20 runtime)", s)
	}
	if got := s.OwnShare(); got < 0.0588 || got > 0.0589 {
		t.Fatalf("own share %v, want 20/340", got)
	}
	if _, err := SplitAllocs(nil, &profile.Profile{SampleType: []*profile.ValueType{{Type: "cpu"}}}); err == nil {
		t.Fatal("a profile without alloc_objects was accepted")
	}
}
