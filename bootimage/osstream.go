package bootimage

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"path"
	"slices"
	"strings"

	operatorv1 "github.com/openshift/api/operator/v1"
)

// Pools of every OpenShift cluster.
const (
	masterPool = "master"
	workerPool = "worker"
)

// OSStreamChoice is the OS stream an object's boot image comes from, and why.
type OSStreamChoice struct {
	// Name is the stream, a key of coreos-bootimages' `streams`.
	Name string
	// From says where Name came from, for messages.
	From string
	// Note, when set, says that the object's labels or pool disagree with Name: its machines
	// will not run the OS they boot, which an admin must hear of.
	Note string
	// unserved is Note for when coreos-bootimages does not carry Name: the object keeps its
	// image, so nothing is booted and then rebased.
	unserved string
}

// OSStream chooses obj's OS stream. Its metadata label osstream decides, as the MCO reads it.
// Without the label, the stream of the pool its machines join does (the pool its user-data stub
// names; master for the ControlPlaneMachineSet): machines rebase to their pool's OS after their
// first boot, so that is the RHEL major they must boot. A pool's stream is its
// spec.osImageStream, else (a custom pool) the worker pool's, else OSImageStream/cluster
// status.defaultStream, else rhel-9, the `stream` key of payloads before 5.0 (the MCO's rule for
// every unlabelled object).
func (c Cluster) OSStream(obj Object) OSStreamChoice {
	pool := poolOf(obj)
	poolStream, poolFrom, known := c.poolStream(pool)
	label := obj.Labels[OSStreamLabel]
	if label == "" { // an empty label names no stream
		return OSStreamChoice{Name: poolStream, From: poolFrom}
	}
	choice := OSStreamChoice{Name: label, From: fmt.Sprintf("label %s=%s", OSStreamLabel, label)}
	var notes, unserved []string
	if t, ok := obj.TemplateLabels[OSStreamLabel]; ok && t != label {
		note := fmt.Sprintf("the machine template's label %s=%s disagrees with the object's %s, which decides the boot image", OSStreamLabel, t, label)
		notes, unserved = append(notes, note), append(unserved, note)
	}
	if pool != "" && known && poolStream != label {
		notes = append(notes, fmt.Sprintf("its machines join MachineConfigPool %s, which runs %s (%s): they boot %s and then rebase to %s; make the label and the pool agree",
			pool, poolStream, poolFrom, label, poolStream))
		unserved = append(unserved, fmt.Sprintf("its machines join MachineConfigPool %s, which runs %s (%s); make the label and the pool agree", pool, poolStream, poolFrom))
	}
	choice.Note, choice.unserved = strings.Join(notes, "; "), strings.Join(unserved, "; ")
	return choice
}

// poolStream returns the OS stream of pool ("" when unknown: the cluster's default), where it
// came from, and whether the cluster said it (rather than the rule for payloads before 5.0).
func (c Cluster) poolStream(pool string) (string, string, bool) {
	if s := c.PoolStreams[pool]; pool != "" && s != "" {
		return s, fmt.Sprintf("MachineConfigPool %s spec.osImageStream", pool), true
	}
	if s := c.PoolStreams[workerPool]; pool != "" && pool != masterPool && pool != workerPool && s != "" {
		return s, fmt.Sprintf("custom MachineConfigPool %s without spec.osImageStream takes the worker pool's", pool), true
	}
	if c.DefaultOSStream != "" {
		return c.DefaultOSStream, "OSImageStream cluster status.defaultStream", true
	}
	return LegacyOSStream, "no OSImageStream cluster: the stream of payloads before OpenShift 5.0", false
}

// poolOf returns the pool obj's machines join: the one its user-data stub fetches its config
// from, master for the ControlPlaneMachineSet without one; "" when unknown.
func poolOf(obj Object) string {
	if obj.UserData != nil && obj.UserData.Found {
		if p := userDataPool(obj.UserData.Data); p != "" {
			return p
		}
	}
	if obj.Resource == operatorv1.ControlPlaneMachineSets {
		return masterPool
	}
	return ""
}

// userDataPool returns the MachineConfigPool a user-data stub fetches its config from (the
// Machine Config Server's /config/<pool>, in spec 3's ignition.config.merge or spec 2's append);
// "" when it names none.
func userDataPool(data []byte) string {
	var stub struct {
		Ignition struct {
			Config struct {
				Merge  []struct{ Source string } `json:"merge"`
				Append []struct{ Source string } `json:"append"`
			} `json:"config"`
		} `json:"ignition"`
	}
	if json.Unmarshal(data, &stub) != nil {
		return ""
	}
	for _, ref := range append(stub.Ignition.Config.Merge, stub.Ignition.Config.Append...) {
		u, err := url.Parse(ref.Source)
		if err != nil {
			continue
		}
		if dir, pool := path.Split(u.Path); dir == "/config/" && pool != "" {
			return pool
		}
	}
	return ""
}

// OSStreamsKey identifies the stream choices of c (the pools' and the cluster's default): a
// decision taken on other choices is not current.
func (c Cluster) OSStreamsKey() string {
	parts := []string{c.DefaultOSStream}
	for _, pool := range slices.Sorted(maps.Keys(c.PoolStreams)) {
		parts = append(parts, pool+"="+c.PoolStreams[pool])
	}
	return strings.Join(parts, ",")
}
