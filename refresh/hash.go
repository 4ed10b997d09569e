package refresh

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"slices"
)

// RolloutInputs change what a node boots: a change means new nodes (or a reboot).
type RolloutInputs struct {
	ReleaseImage    string
	MachineConfigs  []string // the user's MachineConfigs, serialised
	FIPS            bool
	KernelArguments []string
	KernelType      string
	Extensions      []string
	OSImage         string
}

// PayloadInputs change files only: a change is eligible for an in-place refresh.
type PayloadInputs struct {
	SSHKey              string
	PullSecret          []byte
	TrustBundle         []byte
	ImageContentSources []string
	Proxy               string
	ImageConfig         string
}

// RolloutHash is a SHA-256 over a canonical, length-prefixed encoding of in: no two different
// inputs encode alike, unlike a hash of concatenated strings.
func RolloutHash(in RolloutInputs) string {
	h := newEncoder("rollout/v1")
	h.string("releaseImage", in.ReleaseImage)
	h.list("machineConfigs", in.MachineConfigs, false)
	h.bool("fips", in.FIPS)
	h.list("kernelArguments", in.KernelArguments, false) // order matters on the command line
	h.string("kernelType", in.KernelType)
	h.list("extensions", in.Extensions, true)
	h.string("osImage", in.OSImage)
	return h.sum()
}

// PayloadHash is a SHA-256 over a canonical, length-prefixed encoding of in.
func PayloadHash(in PayloadInputs) string {
	h := newEncoder("payload/v1")
	h.string("sshKey", in.SSHKey)
	h.bytes("pullSecret", in.PullSecret)
	h.bytes("trustBundle", in.TrustBundle)
	h.list("imageContentSources", in.ImageContentSources, false)
	h.string("proxy", in.Proxy)
	h.string("imageConfig", in.ImageConfig)
	return h.sum()
}

type encoder struct{ h hash.Hash }

func newEncoder(domain string) *encoder {
	e := &encoder{h: sha256.New()}
	e.bytes("domain", []byte(domain))
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

func (e *encoder) bool(name string, v bool) {
	b := []byte{0}
	if v {
		b[0] = 1
	}
	e.bytes(name, b)
}

// list writes a count, then each element; sorted lists are order-insensitive sets.
func (e *encoder) list(name string, v []string, sorted bool) {
	if sorted {
		v = slices.Sorted(slices.Values(v))
	}
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(v)))
	e.bytes(name, n[:])
	for _, s := range v {
		e.string(name+"[]", s)
	}
}

func (e *encoder) sum() string { return hex.EncodeToString(e.h.Sum(nil)) }
