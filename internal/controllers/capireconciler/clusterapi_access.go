package capireconciler

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/clusterapi"
	"github.com/bootimage-operator/bootimage-operator/internal/crdgate"
	"github.com/bootimage-operator/bootimage-operator/internal/kube"
	"github.com/bootimage-operator/bootimage-operator/internal/seams"
	"github.com/bootimage-operator/bootimage-operator/internal/status"
)

const capiGroup = string(bootimage.ClusterAPIGroup)

// clusterAPIReads are the rules without which the Cluster API controllers cannot run: the
// informers of their cache list and watch the owners, their templates, the Clusters, and the
// Machines and infrastructure machines the template copies' collector reads, of the template
// kinds given (an owner's template, and the machines cloned from it, are of the kind it names).
// The writes are not asked for: a missing one is a Warning Forbidden on the object it stops.
func clusterAPIReads(templateKinds []string) []status.Rule {
	var rules []status.Rule
	add := func(group string, resources ...string) {
		for _, res := range resources {
			for _, verb := range []string{"get", "list", "watch"} {
				rules = append(rules, status.Rule{Group: group, Resource: res, Verb: verb})
			}
		}
	}
	add(capiGroup, "machinesets", "machinedeployments", "machines", "clusters")
	for _, kind := range templateKinds {
		add(clusterapi.InfrastructureGroup, strings.ToLower(kind)+"s", strings.ToLower(strings.TrimSuffix(kind, "Template"))+"s")
	}
	return rules
}

// platformTemplateKinds are the Cluster API template kinds of the cluster's platform, read from
// Infrastructure through c: none while Infrastructure is missing (nothing is decided then; the
// rules are reviewed again at each poll) or on a platform without one. Nothing of another
// platform's kinds is read or asked for: a Role may grant the cluster's own kinds only.
func platformTemplateKinds(ctx context.Context, c client.Reader) ([]string, error) {
	infra := &configv1.Infrastructure{}
	if err := c.Get(ctx, client.ObjectKey{Name: "cluster"}, infra); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	if p, ok := bootimage.PlatformFor(bootimage.PlatformOf(infra)); ok && p.Traits().TemplateKind != "" {
		return []string{p.Traits().TemplateKind}, nil
	}
	return nil, nil
}

// ClusterAPIAccess decides whether the Cluster API controllers may run, from what the operator's
// own identity may do in openshift-cluster-api (one SelfSubjectRulesReview a poll of their gate
// while they wait, one every accessRecheckPolls polls while they run, SelfSubjectAccessReviews
// only for what an incomplete review leaves open), and holds what stops them, for the status.
type ClusterAPIAccess struct {
	Client  client.Client
	Changed chan event.GenericEvent

	mu sync.Mutex
	// denied names the missing rules, "" when none are.
	denied string
	// granted is when a review last found every rule held; zero after one that did not.
	granted time.Time
}

// accessRecheckPolls: while every rule is held, the rules are reviewed again only every this
// many polls of the gate (10 minutes at the default poll), so an idle operator sends one review
// per 10 minutes, not two a minute; a revoked rule is noticed that late. While a rule is
// missing, every poll reviews, so a restored one resumes at once.
const accessRecheckPolls = 20

// recheckAfter is how long a review that found every rule held stands.
func recheckAfter(ctx context.Context) time.Duration {
	return accessRecheckPolls * cmp.Or(seams.From(ctx).CRDPollInterval, crdgate.DefaultPollInterval)
}

// Problem is what the rules keep the Cluster API controllers from, "" when nothing.
func (a *ClusterAPIAccess) Problem() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.denied
}

// Allowed reviews the identity's rules and reports whether every rule of clusterAPIReads is held.
func (a *ClusterAPIAccess) Allowed(ctx context.Context) bool {
	a.mu.Lock()
	standing := a.denied == "" && !a.granted.IsZero() && time.Since(a.granted) < recheckAfter(ctx)
	a.mu.Unlock()
	if standing {
		return true
	}
	missing, err := a.missing(ctx)
	msg := ""
	switch {
	case err != nil:
		msg = "The Cluster API controllers wait: cannot review the operator's permissions in " + bootimage.ClusterAPINamespace + ": " + err.Error()
	case len(missing) > 0:
		var rules []string
		for _, r := range missing {
			rules = append(rules, fmt.Sprintf("{apiGroups: [%s], resources: [%s], verbs: [%s]}", r.Group, r.Resource, r.Verb))
		}
		msg = "The Cluster API controllers wait: the operator's roles lack the rules " + strings.Join(rules, ", ") +
			" in namespace " + bootimage.ClusterAPINamespace + " (" + status.ClusterAPIRBACManifest + " lists every rule it needs)"
	}
	a.mu.Lock()
	was := a.denied
	a.denied = msg
	a.granted = time.Time{}
	if msg == "" {
		a.granted = time.Now()
	}
	a.mu.Unlock()
	if msg != was {
		if msg != "" {
			logf.FromContext(ctx).Info("The Cluster API controllers cannot run", "reason", msg)
		}
		a.notify()
	}
	return msg == ""
}

// missing returns the rules of clusterAPIReads the identity lacks in openshift-cluster-api.
func (a *ClusterAPIAccess) missing(ctx context.Context) ([]status.Rule, error) {
	review := &authorizationv1.SelfSubjectRulesReview{Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: bootimage.ClusterAPINamespace}}
	if err := a.Client.Create(ctx, review); err != nil {
		return nil, err
	}
	kinds, err := platformTemplateKinds(ctx, a.Client)
	if err != nil {
		return nil, err
	}
	var missing []status.Rule
	for _, want := range clusterAPIReads(kinds) {
		if slices.ContainsFunc(review.Status.ResourceRules, func(r authorizationv1.ResourceRule) bool { return grants(r, want) }) {
			continue
		}
		if !review.Status.Incomplete {
			missing = append(missing, want)
			continue
		}
		// Another authorizer may grant what RBAC's rules do not show.
		sar := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: bootimage.ClusterAPINamespace, Group: want.Group, Resource: want.Resource, Verb: want.Verb}}}
		if err := a.Client.Create(ctx, sar); err != nil {
			return nil, err
		}
		if !sar.Status.Allowed {
			missing = append(missing, want)
		}
	}
	return missing, nil
}

// grants reports whether r allows want.
func grants(r authorizationv1.ResourceRule, want status.Rule) bool {
	has := func(list []string, v string) bool { return slices.Contains(list, v) || slices.Contains(list, "*") }
	return has(r.Verbs, want.Verb) && has(r.APIGroups, want.Group) && has(r.Resources, want.Resource) && len(r.ResourceNames) == 0
}

func (a *ClusterAPIAccess) notify() {
	select {
	case a.Changed <- event.GenericEvent{Object: &operatorv1.MachineConfiguration{ObjectMeta: metav1.ObjectMeta{Name: kube.MachineConfigurationName}}}:
	default:
	}
}
