package bootimage

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/coreos/stream-metadata-go/stream"
	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
)

// LegacyOSStream is the OS stream of coreos-bootimages' `stream` key: rhel-9 until its end of
// life, and the only stream of payloads without `streams`.
const LegacyOSStream = "rhel-9"

// OSStreamLabel names the OS stream of a MachineSet, ControlPlaneMachineSet or Cluster API object.
const OSStreamLabel = "machineconfiguration.openshift.io/osstream"

// Streams is the parsed coreos-bootimages ConfigMap: every OS stream it carries.
type Streams struct {
	// ByName holds each OS stream by name: the entries of `streams` when the key is there (5.0
	// and later), else `stream` as LegacyOSStream.
	ByName map[string]*stream.Stream
	// Invalid holds the entries of `streams` that are not CoreOS streams, with the problem: only
	// their objects are in error.
	Invalid map[string]error
	// Keyed is true when the ConfigMap has the `streams` key.
	Keyed bool
	// ReleaseVersion is the release that wrote the ConfigMap.
	ReleaseVersion string
}

// Names lists the OS streams the ConfigMap carries, sorted.
func (s *Streams) Names() []string {
	return slices.Sorted(maps.Keys(s.ByName))
}

// ParseBootImages parses the coreos-bootimages ConfigMap with stream-metadata-go: each entry of
// the `streams` map when present, else the `stream` key as rhel-9. With `streams` there, `stream`
// (a frozen copy of rhel-9) is not read: a labelled object never takes another key's images.
func ParseBootImages(cm *corev1.ConfigMap) (*Streams, error) {
	out := &Streams{ReleaseVersion: cm.Data["releaseVersion"], ByName: map[string]*stream.Stream{}}
	if raw, ok := cm.Data["streams"]; ok {
		var byName map[string]json.RawMessage
		if err := json.Unmarshal([]byte(raw), &byName); err != nil {
			return nil, fmt.Errorf("ConfigMap %s/%s key streams is not a JSON map of OS stream to stream: %s", cm.Namespace, cm.Name, jsonProblem(err))
		}
		if len(byName) == 0 {
			return nil, fmt.Errorf("ConfigMap %s/%s key streams holds no OS stream", cm.Namespace, cm.Name)
		}
		out.Keyed = true
		for name, raw := range byName {
			st, err := parseStream(raw)
			if err != nil {
				if out.Invalid == nil {
					out.Invalid = map[string]error{}
				}
				out.Invalid[name] = fmt.Errorf("ConfigMap %s/%s key streams, entry %s: %v", cm.Namespace, cm.Name, name, err)
				continue
			}
			out.ByName[name] = st
		}
		return out, nil
	}
	raw, ok := cm.Data["stream"]
	if !ok {
		return nil, fmt.Errorf("ConfigMap %s/%s has no stream key", cm.Namespace, cm.Name)
	}
	st, err := parseStream([]byte(raw))
	if err != nil {
		return nil, fmt.Errorf("ConfigMap %s/%s key stream: %v", cm.Namespace, cm.Name, err)
	}
	out.ByName[LegacyOSStream] = st
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

// StreamProblem says what the streams lack for the cluster itself, "" when nothing: the control
// plane's architecture, or boot images of the cluster's platform for it. Such a stream is wrong
// for every object of that stream, so it is reported on MachineConfiguration, not per object.
func StreamProblem(s *Streams, platform configv1.PlatformType, kubeArch string) string {
	rpm, ok := kubeToRPMArch(kubeArch)
	if !ok {
		return ""
	}
	var problems []string
	for _, name := range s.Names() {
		a, ok := s.ByName[name].Architectures[rpm]
		if !ok {
			problems = append(problems, fmt.Sprintf("the %s stream in coreos-bootimages has no %s boot images, the control plane's architecture", name, rpm))
			continue
		}
		p, ok := platforms[platform]
		if ok && p.Traits().InStream != nil && !p.Traits().InStream(a) {
			problems = append(problems, fmt.Sprintf("the %s stream in coreos-bootimages has no %s boot images for %s, the cluster's platform", name, rpm, platform))
		}
	}
	return strings.Join(problems, "; ")
}
