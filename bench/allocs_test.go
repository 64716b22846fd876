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
	withTimeout := fn(5, "context.WithTimeout")
	withCancel := fn(6, "context.withCancel")
	loc := func(id uint64, fs ...*profile.Function) *profile.Location {
		l := &profile.Location{ID: id}
		for _, f := range fs {
			l.Line = append(l.Line, profile.Line{Function: f})
		}
		return l
	}
	lOwn, lGRPC, lMake, lProc := loc(1, own), loc(2, grpc), loc(3, makeslice), loc(4, newproc)
	lCtx := loc(5, withCancel, withTimeout) // an inlined call, innermost first
	mk := func(ownN, grpcN, runtimeN int64) *profile.Profile {
		return &profile.Profile{
			SampleType: []*profile.ValueType{{Type: "alloc_objects", Unit: "count"}, {Type: "alloc_space", Unit: "bytes"}},
			Sample: []*profile.Sample{
				// makeslice allocates for its caller: otlpgate's.
				{Location: []*profile.Location{lMake, lOwn, lGRPC}, Value: []int64{ownN, 0}},
				{Location: []*profile.Location{lMake, lGRPC}, Value: []int64{grpcN, 0}},
				// The standard library allocates for its caller too: otlpgate's, then grpc-go's.
				{Location: []*profile.Location{lMake, lCtx, lOwn, lGRPC}, Value: []int64{ownN, 0}},
				{Location: []*profile.Location{lMake, lCtx, lGRPC, lOwn}, Value: []int64{grpcN, 0}},
				// Only runtime frames: other.
				{Location: []*profile.Location{lProc}, Value: []int64{runtimeN, 0}},
			},
		}
	}
	s, err := SplitAllocs(mk(10, 100, 5), mk(30, 400, 25))
	if err != nil {
		t.Fatal(err)
	}
	if s.Own != 40 || s.Other != 620 {
		t.Fatalf("split %+v, want own 40, other 620 (600 grpc + 20 runtime)", s)
	}
	if got := s.OwnShare(); got < 0.0606 || got > 0.0607 {
		t.Fatalf("own share %v, want 40/660", got)
	}
	if _, err := SplitAllocs(nil, &profile.Profile{SampleType: []*profile.ValueType{{Type: "cpu"}}}); err == nil {
		t.Fatal("a profile without alloc_objects was accepted")
	}
}
