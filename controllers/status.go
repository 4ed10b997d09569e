package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	configv1ac "github.com/openshift/client-go/config/applyconfigurations/config/v1"
	operatorv1ac "github.com/openshift/client-go/operator/applyconfigurations/operator/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
)

// Conditions this operator writes on MachineConfiguration/cluster. The first two are the MCO's.
const (
	ConditionBootImageUpdateProgressing = operatorv1.MachineConfigurationBootImageUpdateProgressing
	ConditionBootImageUpdateDegraded    = operatorv1.MachineConfigurationBootImageUpdateDegraded
	// ConditionConfigurationDegraded is True while part of spec.managedBootImages is overridden
	// because it is not valid; its message says what to change.
	ConditionConfigurationDegraded = "BootImageConfigurationDegraded"
	// ConditionStatusWritten is False while the API rejects the status this operator computed;
	// its message names the field and the API's answer.
	ConditionStatusWritten = "BootImageStatusWritten"
	// ConditionBootImageUpdateSupported is False while boot images cannot be managed at all: an
	// unsupported platform, or Machine API CRDs not installed; its message says which.
	ConditionBootImageUpdateSupported = "BootImageUpdateSupported"
	// ConditionUpgradeable is set on the ClusterOperator named by --cluster-operator-name.
	ConditionUpgradeable = string(configv1.OperatorUpgradeable)
)

// Condition reasons and Event reasons of the status writer.
const (
	ReasonAsExpected                = "AsExpected"
	ReasonInvalidSelection          = "InvalidSelection"
	ReasonBootImageUpdating         = "BootImageUpdating"
	ReasonBootImageUpdateFailed     = "BootImageUpdateFailed"
	ReasonStatusRejected            = "StatusRejected"
	ReasonClusterBootImageSkewError = "ClusterBootImageSkewError"
)

// FieldManager is this operator's server-side apply field manager: it owns exactly the status
// fields and condition types it applies, so the MCO's own writer keeps its own.
const FieldManager = "bootimage-operator"

// maxErrorsInMessage bounds the Degraded message on clusters with many broken MachineSets.
const maxErrorsInMessage = 5

// countsRefresh is how often the counts of a long wave are rewritten while Progressing stays True:
// the status is written when Progressing or Degraded change, not for every MachineSet done.
const countsRefresh = 30 * time.Second

// progress is the tally of the current decisions per resource.
type progress struct {
	machineSets, cpms tally
	errs              []string
	leftBehind        []string
	// clusterLevel are the reasons of errors of the cluster's inputs some object is held by.
	clusterLevel map[string]bool
	// marketplaceRHCOS is the oldest RHCOS release chosen for a marketplace MachineSet.
	marketplaceRHCOS string
}

type tally struct{ total, decided, reconciled, skipped, updating, errored int }

// pending reports whether an object of the resource is being updated or not yet decided on the
// current inputs.
func (t tally) pending() bool { return t.updating > 0 || t.decided < t.total }

func (p *progress) add(t *tally, d bootimage.Decision) {
	t.decided++
	if d.Kind == "MachineSet" && d.Marketplace && d.BootImageVersion != "" && (d.Action == bootimage.NoChange || d.Action == bootimage.Update) {
		if p.marketplaceRHCOS == "" || bootimage.CompareRHCOSVersions(d.BootImageVersion, p.marketplaceRHCOS) < 0 {
			p.marketplaceRHCOS = d.BootImageVersion
		}
	}
	switch d.Action {
	case bootimage.NoChange:
		t.reconciled++
	case bootimage.Skip:
		t.reconciled++
		t.skipped++
		if d.LeftBehind() && d.Kind == "MachineSet" {
			p.leftBehind = append(p.leftBehind, d.Name)
		}
	case bootimage.Update:
		t.updating++
	case bootimage.Error:
		t.errored++
		if d.ClusterLevel() { // said once, among the cluster's warnings
			if p.clusterLevel == nil {
				p.clusterLevel = map[string]bool{}
			}
			p.clusterLevel[d.Reason] = true
		} else {
			p.errs = append(p.errs, fmt.Sprintf("%s %s/%s: %s: %s", d.Kind, d.Namespace, d.Name, d.Reason, d.Message))
		}
	}
}

// pass returns what the finished pass over the MachineSets achieved, nil while one is under way.
func (p progress) pass(bootImages *corev1.ConfigMap) *bootimage.SkewPass {
	if p.machineSets.pending() {
		return nil
	}
	pass := &bootimage.SkewPass{LeftBehind: p.leftBehind, Errors: p.machineSets.errored, RHCOSVersion: p.marketplaceRHCOS}
	if bootImages != nil {
		pass.ReleaseVersion = bootImages.Data["releaseVersion"]
	}
	sort.Strings(pass.LeftBehind)
	return pass
}

func (p progress) counts() string {
	return fmt.Sprintf("Reconciled %d of %d MAPI MachineSets (%d skipped) | Reconciled %d of %d ControlPlaneMachineSets (%d skipped)",
		p.machineSets.reconciled, p.machineSets.total, p.machineSets.skipped, p.cpms.reconciled, p.cpms.total, p.cpms.skipped)
}

// setProgressConditions sets Progressing (True while any resource has an object pending) and
// Degraded (True while an object is in Error or the cluster-wide warnings say the inputs are
// wrong), with the MCO's counts in their messages.
func setProgressConditions(mc *operatorv1.MachineConfiguration, p progress, warnings []string) {
	counts := p.counts()
	progressing := metav1.Condition{Type: ConditionBootImageUpdateProgressing, Status: metav1.ConditionFalse, Reason: ReasonAsExpected, Message: counts, ObservedGeneration: mc.Generation}
	if p.machineSets.pending() || p.cpms.pending() {
		progressing.Status, progressing.Reason = metav1.ConditionTrue, ReasonBootImageUpdating
	}
	degraded := metav1.Condition{Type: ConditionBootImageUpdateDegraded, Status: metav1.ConditionFalse, Reason: ReasonAsExpected, Message: counts, ObservedGeneration: mc.Generation}
	errs := append([]string(nil), p.errs...)
	sort.Strings(errs)
	var parts []string
	if len(errs) > 0 {
		parts = append(parts, fmt.Sprintf("%d failed: %s", len(errs), strings.Join(errs[:min(len(errs), maxErrorsInMessage)], "; ")))
	}
	parts = append(parts, warnings...)
	if len(parts) > 0 {
		degraded.Status, degraded.Reason = metav1.ConditionTrue, ReasonBootImageUpdateFailed
		degraded.Message = counts + " | " + strings.Join(parts, " | ")
	}
	meta.SetStatusCondition(&mc.Status.Conditions, progressing)
	meta.SetStatusCondition(&mc.Status.Conditions, degraded)
}

// holdCounts keeps the counts last written while a wave goes on, so a wave of N updates costs a
// write when it starts and one when it ends, not one per object; on long waves the counts are
// refreshed every countsRefresh. It returns when to look again, 0 for no need.
func (r *MachineConfigurationReconciler) holdCounts(current, want *operatorv1.MachineConfiguration, now time.Time) time.Duration {
	oldP := meta.FindStatusCondition(current.Status.Conditions, ConditionBootImageUpdateProgressing)
	oldD := meta.FindStatusCondition(current.Status.Conditions, ConditionBootImageUpdateDegraded)
	newP := meta.FindStatusCondition(want.Status.Conditions, ConditionBootImageUpdateProgressing)
	newD := meta.FindStatusCondition(want.Status.Conditions, ConditionBootImageUpdateDegraded)
	if oldP == nil || oldD == nil || oldP.Status != metav1.ConditionTrue || newP.Status != metav1.ConditionTrue || oldD.Status != newD.Status {
		r.countsWritten = now
		return 0
	}
	// Degraded's message is the counts and what failed: hold the counts only while what failed
	// is the same.
	if strings.TrimPrefix(oldD.Message, oldP.Message) != strings.TrimPrefix(newD.Message, newP.Message) {
		r.countsWritten = now
		return 0
	}
	if newP.Message == oldP.Message {
		return 0
	}
	if wait := countsRefresh - now.Sub(r.countsWritten); wait > 0 {
		newP.Message, newD.Message = oldP.Message, oldD.Message
		return wait
	}
	r.countsWritten = now
	return 0
}

// ownedConditions are the condition types this operator applies on MachineConfiguration.
var ownedConditions = []string{ConditionBootImageUpdateProgressing, ConditionBootImageUpdateDegraded, ConditionConfigurationDegraded, ConditionBootImageUpdateSupported}

// applyStatus applies this operator's part of want's status when it differs from current's:
// observedGeneration, managedBootImagesStatus, the skew enforcement status (when the gate is on)
// and the owned conditions. Server-side apply merges conditions by type, so the MCO's own
// conditions are left alone, and a condition this operator stops applying is removed.
func applyStatus(ctx context.Context, c client.Client, current, want *operatorv1.MachineConfiguration, withSkew bool) error {
	status := operatorv1.MachineConfigurationStatus{
		ObservedGeneration:             want.Status.ObservedGeneration,
		ManagedBootImagesStatus:        want.Status.ManagedBootImagesStatus,
		BootImageSkewEnforcementStatus: want.Status.BootImageSkewEnforcementStatus,
	}
	for _, t := range ownedConditions {
		if cond := meta.FindStatusCondition(want.Status.Conditions, t); cond != nil {
			status.Conditions = append(status.Conditions, *cond)
		}
	}
	if !withSkew {
		status.BootImageSkewEnforcementStatus = operatorv1.BootImageSkewEnforcementStatus{}
	}
	if ownedStatusEqual(current, want, withSkew) && meta.FindStatusCondition(current.Status.Conditions, ConditionStatusWritten) == nil {
		return nil
	}
	if err := apply(ctx, c, status); err != nil {
		return fmt.Errorf("writing status of MachineConfiguration/%s: %w", current.Name, err)
	}
	logf.FromContext(ctx).Info("Updated MachineConfiguration status")
	return nil
}

// applyStatusRejected applies what can be applied after the API rejected the full status: the
// effective configuration and observedGeneration (the boot image reconcilers wait for them) and a
// condition naming the field and the API's message. The skew status is left as it was.
func applyStatusRejected(ctx context.Context, c client.Client, current, want *operatorv1.MachineConfiguration, rejected error) error {
	status := operatorv1.MachineConfigurationStatus{
		ObservedGeneration:      want.Status.ObservedGeneration,
		ManagedBootImagesStatus: want.Status.ManagedBootImagesStatus,
	}
	for _, t := range ownedConditions {
		if cond := meta.FindStatusCondition(want.Status.Conditions, t); cond != nil {
			status.Conditions = append(status.Conditions, *cond)
		}
	}
	msg := rejected.Error()
	var statusErr apierrors.APIStatus
	if errors.As(rejected, &statusErr) {
		msg = statusErr.Status().Message
	}
	status.Conditions = append(status.Conditions, metav1.Condition{
		Type: ConditionStatusWritten, Status: metav1.ConditionFalse, Reason: ReasonStatusRejected,
		Message: "The API rejected the computed status (bootImageSkewEnforcementStatus kept as it was): " + msg, ObservedGeneration: want.Generation,
		LastTransitionTime: metav1.Now(),
	})
	if old := meta.FindStatusCondition(current.Status.Conditions, ConditionStatusWritten); old != nil && old.Message == status.Conditions[len(status.Conditions)-1].Message {
		if ownedStatusEqual(current, want, false) {
			return nil // written already
		}
		status.Conditions[len(status.Conditions)-1].LastTransitionTime = old.LastTransitionTime
	}
	return apply(ctx, c, status)
}

// apply sends status with server-side apply as FieldManager. The typed status is converted to
// its apply configuration through JSON: both share the API's field names.
func apply(ctx context.Context, c client.Client, status operatorv1.MachineConfigurationStatus) error {
	raw, err := json.Marshal(status)
	if err != nil {
		return err
	}
	ac := operatorv1ac.MachineConfigurationStatus()
	if err := json.Unmarshal(raw, ac); err != nil {
		return err
	}
	// Only what this operator computes: the typed zero values of the rest would claim them.
	ac.NodeDisruptionPolicyStatus = nil
	if status.BootImageSkewEnforcementStatus.Mode == "" {
		ac.BootImageSkewEnforcementStatus = nil
	}
	obj := operatorv1ac.MachineConfiguration(MachineConfigurationName).WithStatus(ac)
	return c.Status().Apply(ctx, obj, client.FieldOwner(FieldManager), client.ForceOwnership)
}

// ownedStatusEqual reports whether current already has want's part of the status.
func ownedStatusEqual(current, want *operatorv1.MachineConfiguration, withSkew bool) bool {
	if current.Status.ObservedGeneration != want.Status.ObservedGeneration ||
		!equality.Semantic.DeepEqual(current.Status.ManagedBootImagesStatus, want.Status.ManagedBootImagesStatus) {
		return false
	}
	if withSkew && !equality.Semantic.DeepEqual(current.Status.BootImageSkewEnforcementStatus, want.Status.BootImageSkewEnforcementStatus) {
		return false
	}
	for _, t := range ownedConditions {
		a, b := meta.FindStatusCondition(current.Status.Conditions, t), meta.FindStatusCondition(want.Status.Conditions, t)
		if (a == nil) != (b == nil) || (a != nil && !equality.Semantic.DeepEqual(*a, *b)) {
			return false
		}
	}
	return true
}

// reportGuard reports the skew enforcement guard: the upgrade-blocked metric, a Warning Event when
// it starts blocking, and the Upgradeable condition of the configured ClusterOperator, which is
// what the cluster-version operator reads.
func (r *MachineConfigurationReconciler) reportGuard(ctx context.Context, mc *operatorv1.MachineConfiguration, guard bootimage.SkewGuard, leftBehind []string) error {
	if guard.Blocked && len(leftBehind) > 0 {
		guard.Message += fmt.Sprintf(" (MachineSets whose boot images the operator cannot update: %s)", strings.Join(leftBehind[:min(len(leftBehind), maxErrorsInMessage)], ", "))
	}
	if guard.Blocked && r.lastGuard != guard.Message {
		logf.FromContext(ctx).Info("Boot image skew blocks upgrades", "reason", guard.Message)
		r.Recorder.Event(mc, corev1.EventTypeWarning, ReasonClusterBootImageSkewError, guard.Message)
	}
	r.lastGuard = guard.Message
	if r.ClusterOperator == "" {
		return nil
	}
	co := &configv1.ClusterOperator{}
	err := r.Client.Get(ctx, client.ObjectKey{Name: r.ClusterOperator}, co)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	cond := configv1.ClusterOperatorStatusCondition{Type: configv1.OperatorUpgradeable, Status: configv1.ConditionTrue, Reason: ReasonAsExpected, Message: "Boot image skew does not block upgrades"}
	if guard.Blocked {
		cond.Status, cond.Reason, cond.Message = configv1.ConditionFalse, ReasonClusterBootImageSkewError, guard.Message
	}
	for _, old := range co.Status.Conditions {
		if old.Type == cond.Type {
			if old.Status == cond.Status && old.Reason == cond.Reason && old.Message == cond.Message {
				return nil
			}
			if old.Status == cond.Status {
				cond.LastTransitionTime = old.LastTransitionTime
			}
		}
	}
	if cond.LastTransitionTime.IsZero() {
		cond.LastTransitionTime = metav1.Now()
	}
	if apierrors.IsNotFound(err) {
		// The CVO creates the ClusterOperators of its payload; a standalone operator creates its own.
		if err := r.Client.Apply(ctx, configv1ac.ClusterOperator(r.ClusterOperator).WithSpec(configv1.ClusterOperatorSpec{}), client.FieldOwner(FieldManager)); err != nil {
			return fmt.Errorf("creating ClusterOperator/%s: %w", r.ClusterOperator, err)
		}
	}
	ac := configv1ac.ClusterOperator(r.ClusterOperator).WithStatus(configv1ac.ClusterOperatorStatus().WithConditions(
		configv1ac.ClusterOperatorStatusCondition().WithType(cond.Type).WithStatus(cond.Status).WithReason(cond.Reason).
			WithMessage(cond.Message).WithLastTransitionTime(cond.LastTransitionTime)))
	if err := r.Client.Status().Apply(ctx, ac, client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("setting Upgradeable on ClusterOperator/%s: %w", r.ClusterOperator, err)
	}
	logf.FromContext(ctx).Info("Updated ClusterOperator Upgradeable", "clusterOperator", r.ClusterOperator, "status", cond.Status)
	return nil
}
