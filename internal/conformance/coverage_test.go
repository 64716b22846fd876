package conformance

import (
	"testing"

	_ "github.com/otlpgate/otlpgate/internal/protoreg"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// TestGeneratorCoverage proves the random requests exercise the whole schema: over the seeds
// TestRoundTrip uses, every field of every message reachable from a request is both set and
// left absent somewhere, and every enum field carries a value its enum does not declare. A new
// field in a future reference version fails here until the generator fills it.
func TestGeneratorCoverage(t *testing.T) {
	if *onlySeed != 0 {
		t.Skip("a single seed cannot cover the schema")
	}
	for _, sig := range signals() {
		t.Run(sig.name, func(t *testing.T) {
			c := coverage{set: map[protoreflect.FullName]int{}, unset: map[protoreflect.FullName]int{}, undeclared: map[protoreflect.FullName]int{}}
			var root protoreflect.MessageDescriptor
			for _, seed := range seeds(300) {
				m := sig.newRequest(newGen(seed, sig.stream)).ProtoReflect()
				root = m.Descriptor()
				c.walk(m)
			}
			seen := map[protoreflect.FullName]bool{}
			var check func(md protoreflect.MessageDescriptor)
			check = func(md protoreflect.MessageDescriptor) {
				if seen[md.FullName()] {
					return
				}
				seen[md.FullName()] = true
				for i := range md.Fields().Len() {
					fd := md.Fields().Get(i)
					name := fd.FullName()
					if c.set[name] == 0 {
						t.Errorf("%s is never set", name)
					}
					if c.unset[name] == 0 && md != root {
						t.Errorf("%s is never absent", name)
					}
					if fd.Enum() != nil && c.undeclared[name] == 0 {
						t.Errorf("%s never holds an undeclared enum value", name)
					}
					if fd.Message() != nil {
						check(fd.Message())
					}
				}
			}
			check(root)
		})
	}
}

type coverage struct {
	set, unset, undeclared map[protoreflect.FullName]int
}

func (c coverage) walk(m protoreflect.Message) {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if !m.Has(fd) {
			c.unset[fd.FullName()]++
			continue
		}
		c.set[fd.FullName()]++
		v := m.Get(fd)
		switch {
		case fd.IsList() && fd.Message() != nil:
			for j := range v.List().Len() {
				c.walk(v.List().Get(j).Message())
			}
		case fd.Message() != nil:
			c.walk(v.Message())
		case fd.Enum() != nil && fd.Enum().Values().ByNumber(v.Enum()) == nil:
			c.undeclared[fd.FullName()]++
		}
	}
}
