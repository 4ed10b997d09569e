package controllers

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
)

// Annotations left on a user-data Secret whose stub was upgraded to Ignition spec 3.
const (
	UserDataUpgradedFromAnnotation = "bootimage.openshift.io/user-data-upgraded-from"
	UserDataUpgradedAtAnnotation   = "bootimage.openshift.io/user-data-upgraded-at"
)

// Event reasons besides the decision reasons.
const (
	ReasonBootImageUpdated = "BootImageUpdated"
	ReasonUserDataUpgraded = "UserDataUpgraded"
)

// machineSetProviderSpecPath is where a MachineSet's providerSpec.value sits, for JSON Patch.
const machineSetProviderSpecPath = "/spec/template/spec/providerSpec/value"

// MachineSetReconciler keeps one MachineSet's boot image in step with the stream.
type MachineSetReconciler struct {
	bootImageSteps
}

// Reconcile decides for one MachineSet and applies the decision.
func (r *MachineSetReconciler) Reconcile(ctx context.Context, req reconcile.Request) (ctrl.Result, error) {
	ms := &machinev1beta1.MachineSet{}
	if err := r.Client.Get(ctx, req.NamespacedName, ms); err != nil {
		if apierrors.IsNotFound(err) {
			r.Tracker.Forget("MachineSet", req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	return r.reconcile(ctx, target{
		object: ms,
		obj:    bootimage.MachineSetObject(ms),
		patch: func(d bootimage.Decision, next bootimage.Attempts) ([]byte, error) {
			return d.JSONPatch(machineSetProviderSpecPath, ms.ResourceVersion, bootimage.AnnotationPatchOp(ms.Annotations, bootimage.AttemptsAnnotation, next.String()))
		},
	})
}

// userData reads the user-data Secret named by providerSpec; nil when the providerSpec names none.
func userData(ctx context.Context, c client.Client, providerSpec []byte) (*bootimage.UserData, error) {
	name := bootimage.UserDataSecretName(providerSpec)
	if name == "" {
		return nil, nil
	}
	secret := &corev1.Secret{}
	err := c.Get(ctx, client.ObjectKey{Namespace: MachineAPINamespace, Name: name}, secret)
	if apierrors.IsNotFound(err) {
		return &bootimage.UserData{SecretName: name}, nil
	}
	if err != nil {
		return nil, err
	}
	return &bootimage.UserData{SecretName: name, Found: true, Data: secret.Data["userData"]}, nil
}

// upgradeUserData writes d's upgraded stub into the Secret, recording the version it had and when.
func upgradeUserData(ctx context.Context, c client.Client, recorder record.EventRecorder, namespace, name string, d bootimage.Decision) error {
	secret := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, secret); err != nil {
		return err
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{
			"resourceVersion": secret.ResourceVersion,
			"annotations": map[string]string{
				UserDataUpgradedFromAnnotation: d.UserDataVersion,
				UserDataUpgradedAtAnnotation:   time.Now().UTC().Format(time.RFC3339),
			},
		},
		"data": map[string]string{"userData": base64.StdEncoding.EncodeToString(d.UserData)},
	})
	if err != nil {
		return err
	}
	if err := c.Patch(ctx, secret, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("upgrading user-data Secret %s/%s: %w", namespace, name, err)
	}
	logf.FromContext(ctx).Info("Upgraded user-data stub", "secret", namespace+"/"+name, "from", d.UserDataVersion, "to", bootimage.UserDataStubVersion)
	recorder.Eventf(secret, corev1.EventTypeNormal, ReasonUserDataUpgraded, "Upgraded the user-data stub from Ignition %s to %s for the new boot image", d.UserDataVersion, bootimage.UserDataStubVersion)
	return nil
}

// report records d and, when it changed, says so in an Event and the log: every skip and error
// once, not again while nothing changes.
func report(ctx context.Context, recorder record.EventRecorder, tracker *Tracker, obj client.Object, d bootimage.Decision) {
	if !tracker.Record(d) {
		return
	}
	log := logf.FromContext(ctx).WithValues("kind", d.Kind, "name", d.Namespace+"/"+d.Name, "reason", d.Reason)
	switch d.Action {
	case bootimage.Skip:
		log.V(1).Info("Skipping boot image update", "message", d.Message)
		recorder.Event(obj, corev1.EventTypeNormal, d.Reason, "Boot image update skipped: "+d.Message)
	case bootimage.Error:
		countError(d)
		log.Info("Cannot update boot image", "message", d.Message)
		recorder.Event(obj, corev1.EventTypeWarning, d.Reason, "Boot image update failed: "+d.Message)
	}
}

// SetupWithManager registers the reconciler: per-MachineSet keys for MachineSet changes, and every
// MachineSet when a cluster-wide input changes.
func (r *MachineSetReconciler) SetupWithManager(mgr ctrl.Manager) error {
	allMachineSets := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		list := &machinev1beta1.MachineSetList{}
		if err := r.Client.List(ctx, list, client.InNamespace(MachineAPINamespace)); err != nil {
			logf.FromContext(ctx).Error(err, "Listing MachineSets")
			return nil
		}
		reqs := make([]reconcile.Request, len(list.Items))
		for i, ms := range list.Items {
			reqs[i] = reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&ms)}
		}
		return reqs
	})
	b := ctrl.NewControllerManagedBy(mgr).
		Named("machineset").
		For(&machinev1beta1.MachineSet{}, builder.WithPredicates(
			inNamespace(MachineAPINamespace),
			predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4})
	return watchClusterInputs(b, allMachineSets).Complete(r)
}

// watchClusterInputs adds the cluster-wide inputs of a decision to b, each change mapped by h.
func watchClusterInputs(b *builder.TypedBuilder[reconcile.Request], h handler.EventHandler) *builder.TypedBuilder[reconcile.Request] {
	return b.
		Watches(&operatorv1.MachineConfiguration{}, h, builder.WithPredicates(bootImageConfigChanged())).
		Watches(&configv1.Infrastructure{}, h).
		Watches(&configv1.FeatureGate{}, h).
		Watches(&configv1.ClusterVersion{}, h).
		Watches(&corev1.ConfigMap{}, h, builder.WithPredicates(named(MCONamespace, BootImagesConfigMapName))).
		Watches(&corev1.Secret{}, h, builder.WithPredicates(inNamespace(MachineAPINamespace)))
}

func inNamespace(ns string) predicate.Predicate {
	return predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetNamespace() == ns })
}

func named(ns, name string) predicate.Predicate {
	return predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetNamespace() == ns && o.GetName() == name })
}

// bootImageConfigChanged passes MachineConfiguration events that change what is selected: a new
// generation or a new effective status, not the conditions this operator writes.
func bootImageConfigChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		old, okOld := e.ObjectOld.(*operatorv1.MachineConfiguration)
		cur, okNew := e.ObjectNew.(*operatorv1.MachineConfiguration)
		if !okOld || !okNew {
			return true
		}
		return old.Generation != cur.Generation || old.Status.ObservedGeneration != cur.Status.ObservedGeneration ||
			!jsonEqual(old.Status.ManagedBootImagesStatus, cur.Status.ManagedBootImagesStatus)
	}}
}

func jsonEqual(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}
