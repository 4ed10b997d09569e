package main

import (
	"context"
	"strings"
	"time"

	operatorv1 "github.com/openshift/api/operator/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/internal/kube"
	"github.com/bootimage-operator/bootimage-operator/internal/status"
)

// afterGrace turns each Skip TargetImageUnavailable of p into the Error the operator reports once
// the target has stayed unavailable past bootimage.CloudErrorGrace. The CLI remembers nothing, so
// it reads the clock from the cluster's own record of the operator's decisions: the Degraded
// condition of MachineConfiguration/cluster naming the object (the operator's Error already), or
// the first Event of the object that named the same target (the operator's clock starts with
// that decision, whose Event it records once). No Event, no Error: the plan then says Skip, as the
// operator does in the grace period.
func afterGrace(ctx context.Context, c client.Reader, p Plan, now time.Time) (Plan, error) {
	mc := &operatorv1.MachineConfiguration{}
	degraded := ""
	if err := c.Get(ctx, client.ObjectKey{Name: kube.MachineConfigurationName}, mc); err == nil {
		if cond := meta.FindStatusCondition(mc.Status.Conditions, status.ConditionBootImageUpdateDegraded); cond != nil {
			degraded = cond.Message
		}
	} else if client.IgnoreNotFound(err) != nil {
		return p, err
	}
	p.Summary = bootimage.Summary{}
	for i, d := range p.Items {
		if d.Action == bootimage.Skip && d.Reason == bootimage.ReasonTargetImageUnavailable {
			since, err := kube.FirstSaid(ctx, c, d)
			if err != nil {
				return p, err
			}
			named := strings.Contains(degraded, d.Kind+" "+d.Namespace+"/"+d.Name+": "+bootimage.ReasonTargetImageUnavailable)
			if named || (!since.IsZero() && now.Sub(since) >= bootimage.CloudErrorGrace) {
				p.Items[i] = bootimage.TargetUnavailableTooLong(d, bootimage.CloudErrorGrace)
			}
		}
		p.Summary.Add(p.Items[i])
	}
	return p, nil
}
