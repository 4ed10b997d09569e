package vspherecloud

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
)

// OVACache keeps downloaded OVAs on disk, one file per sha256. A file is written under a
// temporary name, checked against its sha256 and only then renamed in place, and checked again
// before each use: a partial or corrupt download is never handed out. The cache holds at most
// MaxBytes: it keeps only the OVA being asked for, since a cluster boots one stream at a time.
type OVACache struct {
	// Dir is a writable directory owned by the cache.
	Dir string
	// MaxBytes bounds an OVA's size, and so the cache's.
	MaxBytes int64
	// Client downloads; nil uses the default transport (proxy from the environment) with a
	// timeout for the response headers.
	Client *http.Client

	once sync.Once
	// turn is held by the one download at a time; waiting for it honours the caller's context.
	turn chan struct{}
}

// Get returns the path of the OVA at location whose sha256 is sum, downloading it unless a
// verified copy is cached.
func (c *OVACache) Get(ctx context.Context, location, sum string) (string, error) {
	sum = strings.ToLower(sum)
	if len(sum) != sha256.Size*2 {
		return "", fmt.Errorf("OVA %s: the stream's sha256 %q is not a SHA-256 checksum; refusing an unverifiable download", location, sum)
	}
	// One download at a time: the cache holds one OVA, and two failure domains want the same one.
	c.once.Do(func() { c.turn = make(chan struct{}, 1) })
	select {
	case c.turn <- struct{}{}:
		defer func() { <-c.turn }()
	case <-ctx.Done():
		return "", fmt.Errorf("OVA %s: waiting for another download: %w", location, context.Cause(ctx))
	}
	final := filepath.Join(c.Dir, sum+".ova")
	if got, err := fileSHA256(final); err == nil && got == sum {
		return final, nil
	} else if err == nil {
		logr.FromContextOrDiscard(ctx).Info("Discarding a cached OVA whose sha256 changed", "path", final, "sha256", got, "want", sum)
	}
	if err := c.evictAll(); err != nil {
		return "", err
	}
	if err := c.download(ctx, location, sum, final); err != nil {
		return "", err
	}
	return final, nil
}

func (c *OVACache) download(ctx context.Context, location, sum, final string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, location, nil)
	if err != nil {
		return fmt.Errorf("OVA %s: %w", location, err)
	}
	client := c.Client
	if client == nil {
		transport := http.DefaultTransport.(*http.Transport).Clone()
		transport.ResponseHeaderTimeout = time.Minute
		client = &http.Client{Transport: transport}
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("downloading OVA %s: %w", location, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("downloading OVA %s: HTTP %s", location, resp.Status)
	}
	if resp.ContentLength > c.MaxBytes {
		return fmt.Errorf("OVA %s (sha256 %s) is %d bytes, larger than the cache's %d bytes", location, sum, resp.ContentLength, c.MaxBytes)
	}
	tmp, err := os.CreateTemp(c.Dir, ".download-*")
	if err != nil {
		return fmt.Errorf("OVA cache: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op once renamed
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(resp.Body, c.MaxBytes+1))
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	switch got := hex.EncodeToString(h.Sum(nil)); {
	case err != nil:
		return fmt.Errorf("downloading OVA %s (sha256 %s): %w", location, sum, err)
	case n > c.MaxBytes:
		return fmt.Errorf("OVA %s (sha256 %s) is larger than the cache's %d bytes", location, sum, c.MaxBytes)
	case got != sum:
		return fmt.Errorf("OVA %s: downloaded %d bytes with sha256 %s, but the stream says %s: refusing it", location, n, got, sum)
	}
	if err := os.Rename(tmp.Name(), final); err != nil {
		return fmt.Errorf("OVA cache: %w", err)
	}
	logr.FromContextOrDiscard(ctx).Info("Downloaded OVA", "location", location, "sha256", sum, "bytes", n)
	return nil
}

// evictAll removes every cached file, including downloads a crash left behind.
func (c *OVACache) evictAll() error {
	entries, err := os.ReadDir(c.Dir)
	if err != nil {
		return fmt.Errorf("OVA cache: %w", err)
	}
	for _, e := range entries {
		if e.Type().IsRegular() {
			if err := os.Remove(filepath.Join(c.Dir, e.Name())); err != nil {
				return fmt.Errorf("OVA cache: %w", err)
			}
		}
	}
	return nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
