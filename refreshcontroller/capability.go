package controller

import (
	"fmt"
	"strings"

	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/bootimage-operator/bootimage-operator/refresh"
	"github.com/bootimage-operator/bootimage-operator/refresh/hypershift"
)

// ProxyEnvFile is the MCO's proxy environment file. crio and the kubelet read it as an
// EnvironmentFile (their 10-mco-default-env.conf drop-ins, present only while a proxy is set), so
// a change takes effect when they restart; the MCO's default node disruption policies name no
// action for it, so its daemon reboots.
const ProxyEnvFile = "/etc/mco/proxy.env"

// restartPolicies is what a daemon that says it runs Restart applies: the MCO's cluster default
// policies, plus the enhancement's entry for the proxy (restart crio, then the kubelet). Adding
// or removing a proxy also changes those drop-ins, a unit change, which still reboots.
func restartPolicies() refresh.Policies {
	p := refresh.DefaultPolicies()
	restart := func(unit string) operatorv1.NodeDisruptionPolicyStatusAction {
		return operatorv1.NodeDisruptionPolicyStatusAction{Type: operatorv1.RestartStatusAction,
			Restart: &operatorv1.RestartService{ServiceName: operatorv1.NodeDisruptionPolicyServiceName(unit)}}
	}
	p.Files = append(p.Files, operatorv1.NodeDisruptionPolicyStatusFile{Path: ProxyEnvFile,
		Actions: []operatorv1.NodeDisruptionPolicyStatusAction{restart("crio.service"), restart("kubelet.service")}})
	return p
}

// ReasonNeedsRestartCapableDaemon is the verdict of a change that is a refresh only for a daemon
// that runs Restart, on a pool where some daemon has not said it can.
const ReasonNeedsRestartCapableDaemon = "NeedsRestartCapableDaemon"

// decide decides a change with today's daemon's rules, or, when every node's daemon says it
// runs Restart, with restartPolicies (a CA bundle: restart update-ca-trust and crio; the proxy:
// restart crio and the kubelet).
// A change only the latter refresh is left to the next rollout while any daemon cannot, as the
// enhancement's fallback for an old daemon says.
func decide(nodes []corev1.Node, current, next []byte) (hypershift.Verdict, error) {
	today, err := hypershift.DecideRefresh(current, next)
	if err != nil || today.Refresh {
		return today, err
	}
	withRestart, err := hypershift.DecideRefreshWithPolicies(current, next, restartPolicies())
	if err != nil || !withRestart.Refresh {
		return today, err
	}
	var unable []string
	for i := range nodes {
		if !hasCapability(&nodes[i], CapabilityRestart) {
			unable = append(unable, nodes[i].Name)
		}
	}
	if len(unable) == 0 {
		return withRestart, nil
	}
	return hypershift.Verdict{Reason: ReasonNeedsRestartCapableDaemon, Result: withRestart.Result,
		Message: fmt.Sprintf("%s today; a daemon that runs Restart would apply it in place (%s), and the daemon of %d node(s) cannot (%s): %s",
			today.Message, withRestart.Message, len(unable), DaemonCapabilitiesAnnotation, strings.Join(unable[:min(len(unable), 5)], ", "))}, nil
}

func hasCapability(n *corev1.Node, capability string) bool {
	for c := range strings.SplitSeq(n.Annotations[DaemonCapabilitiesAnnotation], ",") {
		if strings.TrimSpace(c) == capability {
			return true
		}
	}
	return false
}
