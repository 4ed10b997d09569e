package bootimage

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/coreos/stream-metadata-go/stream"
	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
)

// DefaultOSStream is the OS stream MachineSets boot unless their label names another one.
const DefaultOSStream = "rhel-9"

// OSStreamLabel names a MachineSet's OS stream.
const OSStreamLabel = "machineconfiguration.openshift.io/osstream"

// Streams is the parsed coreos-bootimages ConfigMap.
type Streams struct {
	// Default is the stream of DefaultOSStream.
	Default *stream.Stream
	// ReleaseVersion is the release that wrote the ConfigMap.
	ReleaseVersion string
}

// ParseBootImages parses the coreos-bootimages ConfigMap with stream-metadata-go: the `streams`
// map when present (its DefaultOSStream entry), else the `stream` key.
func ParseBootImages(cm *corev1.ConfigMap) (*Streams, error) {
	out := &Streams{ReleaseVersion: cm.Data["releaseVersion"]}
	if raw, ok := cm.Data["streams"]; ok {
		var byName map[string]json.RawMessage
		if err := json.Unmarshal([]byte(raw), &byName); err != nil {
			return nil, fmt.Errorf("ConfigMap %s/%s key streams is not a JSON map of OS stream to stream: %s", cm.Namespace, cm.Name, jsonProblem(err))
		}
		if s, ok := byName[DefaultOSStream]; ok {
			st, err := parseStream(s)
			if err != nil {
				return nil, fmt.Errorf("ConfigMap %s/%s key streams, entry %s: %v", cm.Namespace, cm.Name, DefaultOSStream, err)
			}
			out.Default = st
			return out, nil
		}
	}
	raw, ok := cm.Data["stream"]
	if !ok {
		return nil, fmt.Errorf("ConfigMap %s/%s has no stream key", cm.Namespace, cm.Name)
	}
	st, err := parseStream([]byte(raw))
	if err != nil {
		return nil, fmt.Errorf("ConfigMap %s/%s key stream: %v", cm.Namespace, cm.Name, err)
	}
	out.Default = st
	return out, nil
}

func parseStream(raw []byte) (*stream.Stream, error) {
	var st stream.Stream
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, fmt.Errorf("not a CoreOS stream: %s", jsonProblem(err))
	}
	if len(st.Architectures) == 0 {
		return nil, fmt.Errorf("CoreOS stream %q lists no architectures", st.Stream)
	}
	return &st, nil
}

// StreamCache remembers the last parsed coreos-bootimages ConfigMap, so deciding for every
// MachineSet after a change parses the stream once, not once per MachineSet.
type StreamCache struct {
	mu      sync.Mutex
	key     string
	streams *Streams
	err     error
}

// Parse returns ParseBootImages(cm), reusing the last result while cm's UID and resourceVersion
// are the same.
func (c *StreamCache) Parse(cm *corev1.ConfigMap) (*Streams, error) {
	if cm.ResourceVersion == "" {
		return ParseBootImages(cm)
	}
	key := string(cm.UID) + "/" + cm.ResourceVersion
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.key != key {
		c.streams, c.err = ParseBootImages(cm)
		c.key = key
	}
	return c.streams, c.err
}

// StreamProblem says what the stream lacks for the cluster itself, "" when nothing: the control
// plane's architecture, or boot images of the cluster's platform for it. Such a stream is wrong
// for every MachineSet, so it is reported on MachineConfiguration, not per MachineSet.
func StreamProblem(s *Streams, platform configv1.PlatformType, kubeArch string) string {
	rpm, ok := RPMArch(kubeArch)
	if !ok {
		return ""
	}
	a, ok := s.Default.Architectures[rpm]
	if !ok {
		return fmt.Sprintf("the %s stream in coreos-bootimages has no %s boot images, the control plane's architecture", DefaultOSStream, rpm)
	}
	p, ok := platforms[platform]
	if !ok || p.Traits().InStream == nil {
		return ""
	}
	if !p.Traits().InStream(a) {
		return fmt.Sprintf("the %s stream in coreos-bootimages has no %s boot images for %s, the cluster's platform", DefaultOSStream, rpm, platform)
	}
	return ""
}
