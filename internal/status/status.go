// Package status computes and writes this operator's part of MachineConfiguration/cluster
// status: the progress counts and conditions from the current decisions (progress.go), applied
// with server-side apply only when they changed, backing off while a second writer rewrites them.
// It also sets Upgradeable on a configured ClusterOperator for the boot image skew guard.
package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/internal/kube"
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

// statusRule is what a status write (server-side apply, a patch) needs.
var statusRule = Rule{Verb: "patch", Group: operatorv1.GroupName, Resource: "machineconfigurations/status"}

// ForbiddenRetry is how soon a write refused for want of an RBAC rule is tried again: roles change
// without any event the operator watches.
const ForbiddenRetry = time.Minute

// FieldManager is this operator's server-side apply field manager: it owns exactly the status
// fields and condition types it applies, so the MCO's own writer keeps its own.
const FieldManager = "bootimage-operator"

// ownedConditions are the condition types this operator applies on MachineConfiguration.
var ownedConditions = []string{ConditionBootImageUpdateProgressing, ConditionBootImageUpdateDegraded, ConditionConfigurationDegraded, ConditionBootImageUpdateSupported}

// Writer writes the status the MachineConfiguration reconciler computes. It remembers what it
// wrote and announced, so one Writer serves one reconciler, one reconcile at a time.
type Writer struct {
	Client client.Client
	// Reader reads from the API server, for the managed fields the cache drops.
	Reader   client.Reader
	Recorder record.EventRecorder
	Clock    clock.PassiveClock
	// ClusterOperator, when set, names the ClusterOperator whose Upgradeable condition carries
	// the skew enforcement guard.
	ClusterOperator string
	// ContestedWrites is the status writes allowed per DefaultContestInterval while a second writer
	// is seen; 0 means DefaultContestedWrites.
	ContestedWrites int

	// contest backs the writes off while a second writer is seen (secondwriter.go).
	contest        statusContest
	contestMessage string
	// lastGuard and lastRejection are what was last announced by Event, so each is announced once.
	lastGuard, lastRejection string
}

// Write writes want's part of the status this operator owns when current lacks it. While a second
// writer rewrites it, want's Degraded condition says so and the writes are rationed: held is true
// when this write must wait (retry after retryAfter). A status the API rejects is announced once
// and the part it can take is written instead (see applyStatusRejected). The second writer
// detector remembers what the API server answered to the write that landed, never what was meant.
func (w *Writer) Write(ctx context.Context, current, want *operatorv1.MachineConfiguration, withSkew bool) (held bool, retryAfter time.Duration, err error) {
	computed := want.DeepCopy()
	if ok, wait, err := w.checkStatusContest(ctx, current, want, withSkew); err != nil || !ok {
		return true, wait, err
	}
	applied, err := applyStatus(ctx, w.Client, current, want, withSkew)
	if err == nil {
		w.lastRejection = ""
		w.contest.landed(computed, applied)
		return false, 0, nil
	}
	if forbidden := AsForbidden(err); forbidden != nil {
		// Nothing landed and no fallback can: say which rule is missing, and look again later.
		if msg := forbidden.Error(); w.lastRejection != msg {
			w.lastRejection = msg
			w.Recorder.Event(current, corev1.EventTypeWarning, ReasonForbidden, msg)
			logf.FromContext(ctx).Error(err, "Writing MachineConfiguration status", "verb", forbidden.Rule.Verb, "resource", forbidden.Rule.Resource)
		}
		return true, ForbiddenRetry, nil
	}
	// Keep deciding and writing what can be written: the boot image reconcilers wait only for
	// observedGeneration, which the fallback write carries.
	if w.lastRejection != err.Error() {
		w.lastRejection = err.Error()
		w.Recorder.Event(current, corev1.EventTypeWarning, ReasonStatusRejected, err.Error())
		logf.FromContext(ctx).Error(err, "Writing MachineConfiguration status")
	}
	applied, err = applyStatusRejected(ctx, w.Client, current, want, err)
	if err == nil {
		w.contest.landed(computed, applied)
	}
	return false, 0, err
}

// applyStatus applies this operator's part of want's status when it differs from current's:
// observedGeneration, managedBootImagesStatus, the skew enforcement status (when the gate is on)
// and the owned conditions. Server-side apply merges conditions by type, so the MCO's own
// conditions are left alone, and a condition this operator stops applying is removed. It returns
// the object as the API server stored it, nil when nothing was written.
func applyStatus(ctx context.Context, c client.Client, current, want *operatorv1.MachineConfiguration, withSkew bool) (*operatorv1.MachineConfiguration, error) {
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
		return nil, nil
	}
	applied, err := apply(ctx, c, status)
	if err != nil {
		return nil, fmt.Errorf("writing status of MachineConfiguration/%s: %w", current.Name, Forbidden(err, statusRule))
	}
	logf.FromContext(ctx).Info("Updated MachineConfiguration status")
	return applied, nil
}

// applyStatusRejected applies what can be applied after the API rejected the full status: the
// effective configuration and observedGeneration (the boot image reconcilers wait for them) and a
// condition naming the field and the API's message. The skew status is left as it was. It returns
// the object as the API server stored it, nil when nothing was written.
func applyStatusRejected(ctx context.Context, c client.Client, current, want *operatorv1.MachineConfiguration, rejected error) (*operatorv1.MachineConfiguration, error) {
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
			return nil, nil // written already
		}
		status.Conditions[len(status.Conditions)-1].LastTransitionTime = old.LastTransitionTime
	}
	return apply(ctx, c, status)
}

// apply sends status with server-side apply as FieldManager and returns the object the API server
// answered with. The apply configuration names only the fields this operator computes, so a field
// the API adds later is never claimed by accident.
func apply(ctx context.Context, c client.Client, status operatorv1.MachineConfigurationStatus) (*operatorv1.MachineConfiguration, error) {
	obj := operatorv1ac.MachineConfiguration(kube.MachineConfigurationName).WithStatus(statusApply(status))
	if err := c.Status().Apply(ctx, obj, client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return nil, err
	}
	// The client decodes the API server's answer into the apply configuration.
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	stored := &operatorv1.MachineConfiguration{}
	return stored, json.Unmarshal(raw, stored)
}

// statusApply is the apply configuration of this operator's part of status.
func statusApply(status operatorv1.MachineConfigurationStatus) *operatorv1ac.MachineConfigurationStatusApplyConfiguration {
	ac := operatorv1ac.MachineConfigurationStatus().
		WithObservedGeneration(status.ObservedGeneration).
		WithManagedBootImagesStatus(managedBootImagesApply(status.ManagedBootImagesStatus))
	for _, cond := range status.Conditions {
		ac.WithConditions(metav1ac.Condition().WithType(cond.Type).WithStatus(cond.Status).WithReason(cond.Reason).
			WithMessage(cond.Message).WithObservedGeneration(cond.ObservedGeneration).WithLastTransitionTime(cond.LastTransitionTime))
	}
	if skew := status.BootImageSkewEnforcementStatus; skew.Mode != "" {
		ac.WithBootImageSkewEnforcementStatus(skewStatusApply(skew))
	}
	return ac
}

func managedBootImagesApply(m operatorv1.ManagedBootImages) *operatorv1ac.ManagedBootImagesApplyConfiguration {
	ac := operatorv1ac.ManagedBootImages()
	for _, mm := range m.MachineManagers {
		sel := operatorv1ac.MachineManagerSelector().WithMode(mm.Selection.Mode)
		if p := mm.Selection.Partial; p != nil {
			partial := operatorv1ac.PartialSelector()
			if ls := p.MachineResourceSelector; ls != nil {
				partial.WithMachineResourceSelector(labelSelectorApply(ls))
			}
			sel.WithPartial(partial)
		}
		ac.WithMachineManagers(operatorv1ac.MachineManager().WithResource(mm.Resource).WithAPIGroup(mm.APIGroup).WithSelection(sel))
	}
	return ac
}

func labelSelectorApply(ls *metav1.LabelSelector) *metav1ac.LabelSelectorApplyConfiguration {
	ac := metav1ac.LabelSelector()
	if ls.MatchLabels != nil {
		ac.WithMatchLabels(ls.MatchLabels)
	}
	for _, r := range ls.MatchExpressions {
		ac.WithMatchExpressions(metav1ac.LabelSelectorRequirement().WithKey(r.Key).WithOperator(r.Operator).WithValues(r.Values...))
	}
	return ac
}

func skewStatusApply(s operatorv1.BootImageSkewEnforcementStatus) *operatorv1ac.BootImageSkewEnforcementStatusApplyConfiguration {
	ac := operatorv1ac.BootImageSkewEnforcementStatus().WithMode(s.Mode)
	if a := s.Automatic; a != (operatorv1.ClusterBootImageAutomatic{}) {
		auto := operatorv1ac.ClusterBootImageAutomatic()
		if a.OCPVersion != "" {
			auto.WithOCPVersion(a.OCPVersion)
		}
		if a.RHCOSVersion != "" {
			auto.WithRHCOSVersion(a.RHCOSVersion)
		}
		ac.WithAutomatic(auto)
	}
	if m := s.Manual; m != (operatorv1.ClusterBootImageManual{}) {
		manual := operatorv1ac.ClusterBootImageManual()
		if m.Mode != "" {
			manual.WithMode(m.Mode)
		}
		if m.OCPVersion != "" {
			manual.WithOCPVersion(m.OCPVersion)
		}
		if m.RHCOSVersion != "" {
			manual.WithRHCOSVersion(m.RHCOSVersion)
		}
		ac.WithManual(manual)
	}
	return ac
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

// ReportGuard reports the skew enforcement guard: the upgrade-blocked metric, a Warning Event when
// it starts blocking, and the Upgradeable condition of the configured ClusterOperator, which is
// what the cluster-version operator reads.
//
// The message lists the MachineSets left behind (skipped) only when the recorded skew is what
// blocks; when failing updates block, the Degraded message it quotes names the failed ones. It
// says "Upgrades are blocked" only when this operator sets the block on a ClusterOperator; without
// one it says which ClusterOperator may carry it: the MCO's status sync evaluates the same guard
// from this status for the machine-config ClusterOperator.
func (w *Writer) ReportGuard(ctx context.Context, mc *operatorv1.MachineConfiguration, guard bootimage.SkewGuard, leftBehind []string) error {
	if guard.Blocked && !guard.Failing && len(leftBehind) > 0 {
		guard.Message += fmt.Sprintf(" (MachineSets whose boot images the operator cannot update: %s)", strings.Join(leftBehind[:min(len(leftBehind), MaxErrorsInMessage)], ", "))
	}
	if guard.Blocked && w.ClusterOperator == "" {
		guard.Message = strings.Replace(guard.Message, "Upgrades are blocked", "The boot image skew guard fails, which blocks upgrades where the MCO's status sync reads it (machine-config ClusterOperator)", 1)
	}
	if guard.Blocked && w.lastGuard != guard.Message {
		logf.FromContext(ctx).Info("Boot image skew blocks upgrades", "reason", guard.Message)
		w.Recorder.Event(mc, corev1.EventTypeWarning, ReasonClusterBootImageSkewError, guard.Message)
	}
	w.lastGuard = guard.Message
	if w.ClusterOperator == "" {
		return nil
	}
	co := &configv1.ClusterOperator{}
	err := w.Client.Get(ctx, client.ObjectKey{Name: w.ClusterOperator}, co)
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
		if err := w.Client.Apply(ctx, configv1ac.ClusterOperator(w.ClusterOperator).WithSpec(configv1.ClusterOperatorSpec{}), client.FieldOwner(FieldManager)); err != nil {
			return fmt.Errorf("creating ClusterOperator/%s: %w", w.ClusterOperator, err)
		}
	}
	ac := configv1ac.ClusterOperator(w.ClusterOperator).WithStatus(configv1ac.ClusterOperatorStatus().WithConditions(
		configv1ac.ClusterOperatorStatusCondition().WithType(cond.Type).WithStatus(cond.Status).WithReason(cond.Reason).
			WithMessage(cond.Message).WithLastTransitionTime(cond.LastTransitionTime)))
	if err := w.Client.Status().Apply(ctx, ac, client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("setting Upgradeable on ClusterOperator/%s: %w", w.ClusterOperator, err)
	}
	logf.FromContext(ctx).Info("Updated ClusterOperator Upgradeable", "clusterOperator", w.ClusterOperator, "status", cond.Status)
	return nil
}

// SupportCondition says whether boot images can be managed on this cluster at all, and if not,
// why: the platform (bare metal, None, Azure Stack Hub: what the MCO's CheckBootImagePlatform
// refuses) or Machine API CRDs that are not installed (missing names them; "" when none).
func SupportCondition(generation int64, platform configv1.PlatformType, gates bootimage.Gates, missing string) metav1.Condition {
	cond := metav1.Condition{Type: ConditionBootImageUpdateSupported, Status: metav1.ConditionTrue, Reason: ReasonAsExpected, ObservedGeneration: generation,
		Message: "Boot images are managed on this platform"}
	if len(bootimage.SupportedResources(platform, gates)) == 0 {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, bootimage.ReasonUnsupportedPlatform, bootimage.UnsupportedMessage("MachineSets and ControlPlaneMachineSets", platform)
	} else if missing != "" {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, ReasonMachineAPIMissing, missing
	}
	return cond
}
