package controllers

import (
	"context"
	"fmt"
	"strings"

	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/featuregates"
	"github.com/bootimage-operator/bootimage-operator/migrations"
)

// Conditions this operator writes on MachineConfiguration/cluster.
const (
	// ConditionConfigurationDegraded is True while part of spec.managedBootImages is overridden
	// because it is not valid; its message says what to change.
	ConditionConfigurationDegraded = "BootImageConfigurationDegraded"
	// ConditionUpgradeable is False while the boot image skew blocks upgrades.
	ConditionUpgradeable = "Upgradeable"

	ReasonAsExpected                = "AsExpected"
	ReasonInvalidSelection          = "InvalidSelection"
	ReasonClusterBootImageSkewError = "ClusterBootImageSkewError"
)

// MachineConfigurationName is the name of the singleton MachineConfiguration.
const MachineConfigurationName = "cluster"

// MachineConfigurationReconciler migrates the legacy spec and keeps
// status.managedBootImagesStatus, status.bootImageSkewEnforcementStatus and their conditions.
type MachineConfigurationReconciler struct {
	Client     client.Client
	Gates      featuregates.Source
	Recorder   record.EventRecorder
	Migrations migrations.Runner
}

// Reconcile runs the migrations, then writes the effective status when it changed.
func (r *MachineConfigurationReconciler) Reconcile(ctx context.Context, _ reconcile.Request) (ctrl.Result, error) {
	log := logf.FromContext(ctx)
	mc := &operatorv1.MachineConfiguration{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: MachineConfigurationName}, mc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	infra := &configv1.Infrastructure{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: "cluster"}, infra); err != nil {
		if apierrors.IsNotFound(err) {
			log.Info("Waiting for Infrastructure/cluster: the platform decides the defaults")
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	gates, err := r.Gates.Current(ctx)
	if err != nil {
		// The feature gate reporter says why; nothing gated acts meanwhile.
		return ctrl.Result{}, nil
	}
	platform := bootimage.PlatformOf(infra)

	if _, err := r.Migrations.Run(ctx, mc, migrations.Cluster{Platform: platform, Gates: gates}); err != nil {
		return ctrl.Result{}, err
	}

	before := mc.DeepCopy()
	eff := bootimage.EffectiveConfiguration(mc.Spec.ManagedBootImages, platform, gates)
	mc.Status.ManagedBootImagesStatus = eff.Status
	mc.Status.ObservedGeneration = mc.Generation
	setConfigurationCondition(mc, eff.Problems)
	if gates.Enabled(featuregates.BootImageSkewEnforcement) {
		if err := r.setSkewStatus(ctx, mc, infra, platform, gates, eff.Status); err != nil {
			return ctrl.Result{}, err
		}
	}
	if len(eff.Problems) > 0 && !equality.Semantic.DeepEqual(before.Status.Conditions, mc.Status.Conditions) {
		msg := strings.Join(eff.Problems, "; ")
		log.Info("Overriding invalid boot image configuration", "reason", msg)
		r.Recorder.Event(mc, corev1.EventTypeWarning, ReasonInvalidSelection, msg)
	}
	SetUpgradeBlocked(blockedBySkew(mc.Status.Conditions))
	return ctrl.Result{}, patchStatus(ctx, r.Client, before, mc)
}

func (r *MachineConfigurationReconciler) setSkewStatus(ctx context.Context, mc *operatorv1.MachineConfiguration, infra *configv1.Infrastructure, platform configv1.PlatformType, gates featuregates.Gates, effective operatorv1.ManagedBootImages) error {
	cv := &configv1.ClusterVersion{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: "version"}, cv); client.IgnoreNotFound(err) != nil {
		return err
	}
	status := bootimage.SkewEnforcementStatus(bootimage.SkewInputs{
		Spec:           mc.Spec.BootImageSkewEnforcement,
		Current:        mc.Status.BootImageSkewEnforcementStatus,
		Platform:       platform,
		Topology:       infra.Status.ControlPlaneTopology,
		Effective:      effective,
		Gates:          gates,
		InstallVersion: installVersion(cv),
	})
	mc.Status.BootImageSkewEnforcementStatus = status
	if msg := bootimage.SkewViolation(status); msg != "" {
		meta.SetStatusCondition(&mc.Status.Conditions, metav1.Condition{Type: ConditionUpgradeable, Status: metav1.ConditionFalse, Reason: ReasonClusterBootImageSkewError, Message: msg, ObservedGeneration: mc.Generation})
	} else if c := meta.FindStatusCondition(mc.Status.Conditions, ConditionUpgradeable); c != nil && c.Reason == ReasonClusterBootImageSkewError {
		meta.RemoveStatusCondition(&mc.Status.Conditions, ConditionUpgradeable)
	}
	return nil
}

func setConfigurationCondition(mc *operatorv1.MachineConfiguration, problems []string) {
	cond := metav1.Condition{Type: ConditionConfigurationDegraded, Status: metav1.ConditionFalse, Reason: ReasonAsExpected, Message: "spec.managedBootImages is valid", ObservedGeneration: mc.Generation}
	if len(problems) > 0 {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, ReasonInvalidSelection, strings.Join(problems, "; ")
	}
	meta.SetStatusCondition(&mc.Status.Conditions, cond)
}

// installVersion returns the release of the oldest Completed update: the one installed.
func installVersion(cv *configv1.ClusterVersion) string {
	for i := len(cv.Status.History) - 1; i >= 0; i-- {
		if cv.Status.History[i].State == configv1.CompletedUpdate {
			return cv.Status.History[i].Version
		}
	}
	return cv.Status.Desired.Version
}

// patchStatus writes the status of after when it differs from before, with a merge patch that
// carries the resourceVersion read, so a concurrent writer's change is never lost.
func patchStatus(ctx context.Context, c client.Client, before, after *operatorv1.MachineConfiguration) error {
	if equality.Semantic.DeepEqual(before.Status, after.Status) {
		return nil
	}
	if err := c.Status().Patch(ctx, after, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("patching status of MachineConfiguration/%s: %w", after.Name, err)
	}
	logf.FromContext(ctx).Info("Updated MachineConfiguration status", "machineConfiguration", after.Name)
	return nil
}

// SetupWithManager registers the reconciler; any change of its inputs re-runs it.
func (r *MachineConfigurationReconciler) SetupWithManager(mgr ctrl.Manager) error {
	toSingleton := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: MachineConfigurationName}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("machineconfiguration").
		Watches(&operatorv1.MachineConfiguration{}, toSingleton).
		Watches(&configv1.Infrastructure{}, toSingleton).
		Watches(&configv1.FeatureGate{}, toSingleton).
		Watches(&configv1.ClusterVersion{}, toSingleton).
		Complete(r)
}
