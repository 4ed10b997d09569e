package hypershift

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
)

// encoder is a SHA-256 over a canonical, length-prefixed encoding of named fields: no two
// different inputs encode alike, unlike a hash of concatenated strings.
type encoder struct{ h hash.Hash }

func newEncoder(domain string) *encoder {
	e := &encoder{h: sha256.New()}
	e.string("domain", domain)
	return e
}

// bytes writes the field name and value, each preceded by its length.
func (e *encoder) bytes(name string, v []byte) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(name)))
	e.h.Write(n[:])
	e.h.Write([]byte(name))
	binary.BigEndian.PutUint64(n[:], uint64(len(v)))
	e.h.Write(n[:])
	e.h.Write(v)
}

func (e *encoder) string(name, v string) { e.bytes(name, []byte(v)) }

// list writes a count, then each element in order.
func (e *encoder) list(name string, v []string) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(v)))
	e.bytes(name, n[:])
	for _, s := range v {
		e.string(name+"[]", s)
	}
}

func (e *encoder) sum() string { return hex.EncodeToString(e.h.Sum(nil)) }
