package kafka

import (
	"crypto/rand"
	"encoding/base64"
)

// Client instance ids are Kafka Uuids: 16 bytes, printed as unpadded URL-safe base64 (the form
// clients log and the form matched by the client_instance_id selector).

// reservedID reports the ids Kafka reserves: all zeros ("none", which asks for a new id) and
// the one whose last byte is 1 (the metadata topic id). Neither names a client.
func reservedID(id [16]byte) bool {
	for _, b := range id[:15] {
		if b != 0 {
			return false
		}
	}
	return id[15] <= 1
}

// idString returns the Kafka string form of id.
func idString(id [16]byte) string {
	return base64.RawURLEncoding.EncodeToString(id[:])
}

// newID returns a random version 4 Uuid that is not reserved and whose string form does not
// start with '-' (Kafka's tools would read such an id as a command-line option).
func newID() [16]byte {
	for {
		var id [16]byte
		rand.Read(id[:]) // crypto/rand.Read never fails
		id[6] = id[6]&0x0f | 0x40
		id[8] = id[8]&0x3f | 0x80
		// The first base64 character is the top six bits of the first byte; '-' is 62.
		if reservedID(id) || id[0]>>2 == 62 {
			continue
		}
		return id
	}
}
