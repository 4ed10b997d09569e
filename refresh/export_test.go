package refresh

import "github.com/bootimage-operator/bootimage-operator/refresh/internal/gzipped"

// Spec is what a Config holds, exported to this package's tests so they can build configs,
// including ones Ignition would refuse, without a round trip through JSON.
type Spec = nodeConfig

// FromSpec returns the Config holding s.
func FromSpec(s Spec) Config { return Config{c: s} }

// SpecOf returns what c holds.
func SpecOf(c Config) Spec { return c.c }

// Paths and bounds the tests name.
const (
	RegistriesConf       = registriesConf
	ForceFile            = forceFile
	MaxDecompressedBytes = gzipped.MaxBytes
)
