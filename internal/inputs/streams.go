package inputs

import (
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
)

// StreamCache remembers the last parsed coreos-bootimages ConfigMap, so deciding for every
// MachineSet after a change parses the stream once, not once per MachineSet.
type StreamCache struct {
	mu      sync.Mutex
	key     string
	streams *bootimage.Streams
	err     error
}

// Parse returns bootimage.ParseBootImages(cm), reusing the last result while cm's UID and
// resourceVersion are the same.
func (c *StreamCache) Parse(cm *corev1.ConfigMap) (*bootimage.Streams, error) {
	if cm.ResourceVersion == "" {
		return bootimage.ParseBootImages(cm)
	}
	key := string(cm.UID) + "/" + cm.ResourceVersion
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.key != key {
		c.streams, c.err = bootimage.ParseBootImages(cm)
		c.key = key
	}
	return c.streams, c.err
}
