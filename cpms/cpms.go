// Package cpms decides the boot image of the ControlPlaneMachineSet and proves, before any write,
// that the write cannot trigger a control-plane replacement. It is pure: objects in, decisions out.
package cpms

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	machinev1 "github.com/openshift/api/machine/v1"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
)

// Name is the name of the singleton ControlPlaneMachineSet.
const Name = "cluster"

// ProviderSpecPath is where the template's providerSpec.value sits, for JSON Patch.
const ProviderSpecPath = "/spec/template/machines_v1beta1_machine_openshift_io/spec/providerSpec/value"

// ReasonInactive says an Inactive ControlPlaneMachineSet is left alone: the CPMS operator
// regenerates an Inactive CPMS from the current control-plane machines, so a patch would be
// reverted; it picks the boot image up once the CPMS is Active.
const ReasonInactive = "ControlPlaneMachineSetInactive"

// ReasonNotImageOnly is the Error of a patch that would change more than the boot image.
const ReasonNotImageOnly = "NotImageOnly"

// Object reduces a ControlPlaneMachineSet for bootimage.Decide, with the CPMS's own problems.
func Object(c *machinev1.ControlPlaneMachineSet) bootimage.Object {
	o := bootimage.ControlPlaneMachineSetObject(c)
	if c.Name != Name {
		o.Problem = fmt.Sprintf("ControlPlaneMachineSet %s/%s is not the singleton %q and is not managed", c.Namespace, c.Name, Name)
	}
	return o
}

// Decide applies the CPMS rules on top of a bootimage decision: an Inactive CPMS is skipped, and
// an update is kept only if ProveImageOnly accepts its patch on the object as read.
func Decide(c *machinev1.ControlPlaneMachineSet, d bootimage.Decision, attempts bootimage.Attempts) bootimage.Decision {
	if d.Action != bootimage.Update {
		return d
	}
	if c.Spec.State == machinev1.ControlPlaneMachineSetStateInactive {
		return refuse(d, bootimage.Skip, ReasonInactive, "the ControlPlaneMachineSet is Inactive: the CPMS operator regenerates it from the control-plane machines, so it is updated once Active")
	}
	patch, err := Patch(c, d, attempts)
	if err != nil {
		return refuse(d, bootimage.Error, ReasonNotImageOnly, err.Error())
	}
	if err := ProveImageOnly(c, patch); err != nil {
		return refuse(d, bootimage.Error, ReasonNotImageOnly, err.Error())
	}
	return d
}

// Patch returns the JSON Patch of d for c: its image fields, the attempts annotation and the
// resourceVersion read.
func Patch(c *machinev1.ControlPlaneMachineSet, d bootimage.Decision, attempts bootimage.Attempts, extra ...bootimage.PatchOp) ([]byte, error) {
	return d.JSONPatch(ProviderSpecPath, c.ResourceVersion, append([]bootimage.PatchOp{bootimage.AnnotationPatchOp(c.Annotations, bootimage.AttemptsAnnotation, attempts.String())}, extra...)...)
}

func refuse(d bootimage.Decision, action bootimage.Action, reason, message string) bootimage.Decision {
	d.Action, d.Reason, d.Message = action, reason, message
	d.ProviderSpecPatch, d.UserData = nil, nil
	return d
}

// ProveImageOnly applies patch to c and fails unless the result differs from c only in the boot
// image fields (AWS ami, GCP disks[].image, Azure image), the attempts annotation and the
// resourceVersion: the CPMS operator ignores exactly these when it compares the template with the
// machines, so anything else would replace the control plane.
func ProveImageOnly(c *machinev1.ControlPlaneMachineSet, patch []byte) error {
	before, err := json.Marshal(c)
	if err != nil {
		return err
	}
	p, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		return fmt.Errorf("patch is not a JSON Patch: %v", err)
	}
	after, err := p.Apply(before)
	if err != nil {
		return fmt.Errorf("patch does not apply to the ControlPlaneMachineSet as read: %v", err)
	}
	var b, a map[string]any
	if err := json.Unmarshal(before, &b); err != nil {
		return err
	}
	if err := json.Unmarshal(after, &a); err != nil {
		return err
	}
	stripAllowed(b)
	stripAllowed(a)
	if diff := differences("", b, a); len(diff) > 0 {
		return fmt.Errorf("refusing to write the ControlPlaneMachineSet: the change is not image-only, it also changes %s, which would roll out new control-plane machines", strings.Join(diff, ", "))
	}
	return nil
}

// stripAllowed removes from a CPMS, as generic JSON, the fields an image-only change may touch.
func stripAllowed(obj map[string]any) {
	if md, ok := obj["metadata"].(map[string]any); ok {
		delete(md, "resourceVersion")
		if ann, ok := md["annotations"].(map[string]any); ok {
			// The operator's own bookkeeping: the CPMS operator reads no annotation of its own object.
			for _, key := range []string{bootimage.AttemptsAnnotation, bootimage.HistoryAnnotation, bootimage.HoldAnnotation} {
				delete(ann, key)
			}
			if len(ann) == 0 {
				delete(md, "annotations")
			}
		}
	}
	value := dig(obj, "spec", "template", "machines_v1beta1_machine_openshift_io", "spec", "providerSpec", "value")
	if value == nil {
		return
	}
	delete(value, "ami")
	delete(value, "image")
	if disks, ok := value["disks"].([]any); ok {
		for _, d := range disks {
			if disk, ok := d.(map[string]any); ok {
				delete(disk, "image")
			}
		}
	}
}

func dig(obj map[string]any, path ...string) map[string]any {
	for _, p := range path {
		next, ok := obj[p].(map[string]any)
		if !ok {
			return nil
		}
		obj = next
	}
	return obj
}

// differences lists the paths where a and b differ.
func differences(path string, a, b any) []string {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if !aok || !bok {
		if reflect.DeepEqual(a, b) {
			return nil
		}
		if path == "" {
			path = "/"
		}
		return []string{path}
	}
	var out []string
	keys := map[string]bool{}
	for k := range am {
		keys[k] = true
	}
	for k := range bm {
		keys[k] = true
	}
	for k := range keys {
		out = append(out, differences(path+"/"+k, am[k], bm[k])...)
	}
	sort.Strings(out)
	return out
}
