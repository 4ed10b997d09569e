// Package gzipped decompresses gzip data with a bound, for the refresh module's packages.
package gzipped

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
)

// MaxBytes bounds what one gzip payload (a file's contents, a HyperShift payload) may expand to,
// so a zip bomb gets an error instead of exhausting memory.
const MaxBytes = 64 << 20

// Decompress decompresses data, refusing output above MaxBytes.
func Decompress(data []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("not gzip: %v", err)
	}
	out, err := io.ReadAll(io.LimitReader(zr, MaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("not gzip: %v", err)
	}
	if len(out) > MaxBytes {
		return nil, fmt.Errorf("gzip data expands to more than %d MiB", MaxBytes>>20)
	}
	return out, nil
}
