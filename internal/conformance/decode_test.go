package conformance

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	_ "github.com/otlpgate/otlpgate/internal/protoreg"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// FuzzDecode compares the two decoders on arbitrary bytes, as a request of each signal. They
// must accept and reject the same inputs, except for the pinned divergences
// (divergence_test.go); what both accept must decode to the same message.
func FuzzDecode(f *testing.F) {
	sigs := signals()
	for i, sig := range sigs {
		for seed := range uint64(4) {
			g := newGen(seed+1, sig.stream)
			ref := sig.newRequest(g)
			injectUnknown(g, ref.ProtoReflect())
			b, err := deterministic.Marshal(ref)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(uint8(i), b)
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, b []byte) {
		sig := sigs[int(which)%len(sigs)]
		ref := sig.newRequest(newGen(1, 0)).ProtoReflect().New().Interface()
		refErr := proto.Unmarshal(b, ref)
		vt, viaProto, vtErr := sig.decodeVT(b)
		md := ref.ProtoReflect().Descriptor()
		switch {
		case refErr == nil && vtErr != nil:
			if !findDivergence(md, b).wrongWireType {
				t.Fatalf("UnmarshalVT rejects what the reference accepts: %v", vtErr)
			}
			return
		case refErr != nil && vtErr == nil:
			if !isUTF8Error(refErr) && !findDivergence(md, b).any() {
				t.Fatalf("UnmarshalVT accepts what the reference rejects: %v", refErr)
			}
			return
		case refErr != nil:
			return
		}
		// Compared through the reference decoder, not byte for byte: an input need not be
		// canonical, and the unknown fields UnmarshalVT keeps verbatim (a tag written with too
		// many bytes, say) are normalised by protobuf-go as it reads them (see
		// TestNonMinimalUnknownTag). Canonical inputs are compared byte for byte in TestRoundTrip.
		if err := decodesTo(ref, viaProto); err != nil {
			t.Fatalf("protobuf-go encoding of ours: %v", err)
		}
		clearNegativeZeros(ref.ProtoReflect())
		if err := decodesTo(ref, vt); err != nil {
			t.Fatalf("MarshalVT encoding: %v", err)
		}
	})
}

// isUTF8Error recognises protobuf-go's error for a string that is not valid UTF-8; it has no
// exported sentinel.
func isUTF8Error(err error) bool { return strings.Contains(err.Error(), "invalid UTF-8") }

// decodesTo checks that the reference decodes b to a message proto.Equal to want.
func decodesTo(want proto.Message, b []byte) error {
	got := want.ProtoReflect().New().Interface()
	if err := proto.Unmarshal(b, got); err != nil {
		return fmt.Errorf("reference decode: %w", err)
	}
	if !proto.Equal(got, want) {
		return errors.New("reference decodes it to a different message")
	}
	return nil
}

// decodeVT decodes b with UnmarshalVT and returns its MarshalVT and deterministic protobuf-go
// encodings.
func decodeVT[T any, P vtMessage[T]](b []byte) (vt, viaProto []byte, err error) {
	var m P = new(T)
	if err := m.UnmarshalVT(b); err != nil {
		return nil, nil, err
	}
	if vt, err = m.MarshalVT(); err != nil {
		return nil, nil, err
	}
	if viaProto, err = deterministic.Marshal(m); err != nil {
		return nil, nil, err
	}
	return vt, viaProto, nil
}

// clearNegativeZeros clears every -0 held by a double field without presence, which is what
// MarshalVT writes for it (see TestNegativeZeroWithoutPresence).
func clearNegativeZeros(m protoreflect.Message) {
	var nodes []protoreflect.Message
	collect(m, &nodes)
	for _, n := range nodes {
		fields := n.Descriptor().Fields()
		for i := range fields.Len() {
			fd := fields.Get(i)
			if fd.Kind() != protoreflect.DoubleKind || fd.IsList() || fd.HasPresence() || !n.Has(fd) {
				continue
			}
			if v := n.Get(fd).Float(); v == 0 {
				n.Clear(fd)
			}
		}
	}
}
