package refresh

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
)

// MaxDecompressedBytes bounds what one gzip payload (a file's contents, the HyperShift config)
// may expand to, so a zip bomb gets an error instead of exhausting memory.
const MaxDecompressedBytes = 64 << 20

// gunzip decompresses data, refusing output above MaxDecompressedBytes.
func gunzip(data []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("not gzip: %v", err)
	}
	out, err := io.ReadAll(io.LimitReader(zr, MaxDecompressedBytes+1))
	if err != nil {
		return nil, fmt.Errorf("not gzip: %v", err)
	}
	if len(out) > MaxDecompressedBytes {
		return nil, fmt.Errorf("gzip data expands to more than %d MiB", MaxDecompressedBytes>>20)
	}
	return out, nil
}

func jsonEqual(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && string(ja) == string(jb)
}
