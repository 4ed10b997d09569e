package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
)

// bootImageSteps are the steps every boot image reconciler takes for one object: read the
// cluster, decide, write an update, report. The MachineSet and CPMS reconcilers differ only in
// how they reduce their object, refine the decision and build the patch.
type bootImageSteps struct {
	Client   client.Client
	Inputs   clusterInputs
	Recorder record.EventRecorder
	Tracker  *Tracker
	// Templates imports vSphere templates before a vSphere update is patched in.
	Templates *TemplateImporter
}

// target is one object to reconcile.
type target struct {
	object client.Object
	obj    bootimage.Object
	// refine, when set, applies the object's own rules to the shared decision.
	refine func(bootimage.Decision, bootimage.Attempts) bootimage.Decision
	// patch builds the JSON Patch of an update, with the attempts to record.
	patch func(bootimage.Decision, bootimage.Attempts) ([]byte, error)
}

func (s bootImageSteps) reconcile(ctx context.Context, t target) (ctrl.Result, error) {
	cluster, generation, ready, err := s.Inputs.load(ctx)
	if err != nil || !ready {
		return ctrl.Result{}, err
	}
	key := types.NamespacedName{Namespace: t.object.GetNamespace(), Name: t.object.GetName()}
	if t.obj.UserData, err = userData(ctx, s.Client, t.obj.ProviderSpec); err != nil {
		return ctrl.Result{}, err
	}
	persisted := bootimage.ParseAttempts(t.object.GetAnnotations())
	t.obj.Attempts = s.Tracker.Attempts(t.obj.Kind, key, persisted, generation)
	d, err := bootimage.Decide(ctx, cluster, t.obj)
	if err != nil {
		return ctrl.Result{}, err
	}
	next := persisted.Next(d.Target, generation)
	if t.refine != nil {
		d = t.refine(d, next)
	}
	if d.Action == bootimage.Update && d.VSphere != nil {
		if again, err := s.importTemplate(ctx, t, d); again || err != nil {
			return vsphereResult(err)
		}
	}
	if d.Action == bootimage.Update {
		if err := s.update(ctx, t, key, d, persisted, next, generation); err != nil {
			return ctrl.Result{}, err
		}
	}
	report(ctx, s.Recorder, s.Tracker, t.object, d)
	return ctrl.Result{}, nil
}

// update writes the upgraded user-data stub, if any, then the boot image, each with optimistic
// locking; a conflict is returned so the object is decided again on fresh data.
func (s bootImageSteps) update(ctx context.Context, t target, key types.NamespacedName, d bootimage.Decision, persisted, next bootimage.Attempts, generation int64) error {
	if d.UserData != nil {
		if err := upgradeUserData(ctx, s.Client, s.Recorder, key.Namespace, bootimage.UserDataSecretName(t.obj.ProviderSpec), d); err != nil {
			return err
		}
	}
	patch, err := t.patch(d, next)
	if err != nil {
		return err
	}
	if err := s.Client.Patch(ctx, t.object, client.RawPatch(types.JSONPatchType, patch)); err != nil {
		return fmt.Errorf("patching boot image of %s %s: %w", d.Kind, key, err)
	}
	s.Tracker.Patched(d.Kind, key, persisted, d.Target, generation)
	logf.FromContext(ctx).Info("Updated boot image", "kind", d.Kind, "name", key, "from", d.Current, "to", d.Target)
	s.Recorder.Eventf(t.object, corev1.EventTypeNormal, ReasonBootImageUpdated, "Updated boot image from %s to %s", d.Current, d.Target)
	return nil
}
