package status

import (
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Where the rules the operator needs inside the machine-config-controller are listed: every file
// of RBACManifests, the Cluster API ones in ClusterAPIRBACManifest (manifests.EmbeddedDir and
// manifests.EmbeddedClusterAPIRoleFile, which this package does not import).
const (
	RBACManifests          = "manifests/embedded/"
	ClusterAPIRBACManifest = "manifests/embedded/bootimage-role-cluster-api.yaml"
)

// Rule is the RBAC rule a write needs.
type Rule struct {
	Verb, Group, Resource string
	// Namespace is "" for a cluster-scoped resource.
	Namespace string
}

// ForbiddenError is a write the API server refused for want of Rule.
type ForbiddenError struct {
	Rule Rule
	Err  error
}

// Forbidden returns err as a *ForbiddenError naming rule when the API server refused it as
// forbidden, and err unchanged otherwise.
func Forbidden(err error, rule Rule) error {
	if apierrors.IsForbidden(err) {
		return &ForbiddenError{Rule: rule, Err: err}
	}
	return err
}

// AsForbidden returns the *ForbiddenError err carries, nil when none.
func AsForbidden(err error) *ForbiddenError {
	var f *ForbiddenError
	if errors.As(err, &f) {
		return f
	}
	return nil
}

func (f *ForbiddenError) Unwrap() error { return f.Err }

// Error names the verb, the resource and the rule the identity's roles lack, in RBAC's own words.
func (f *ForbiddenError) Error() string {
	r := f.Rule
	group, scope := r.Group, "cluster-wide"
	if group == "" {
		group = `""`
	}
	if r.Namespace != "" {
		scope = "in namespace " + r.Namespace
	}
	said := f.Err.Error()
	var status apierrors.APIStatus
	if errors.As(f.Err, &status) {
		said = status.Status().Message
	}
	return fmt.Sprintf("Forbidden to %s %s %s: the operator's roles lack the rule {apiGroups: [%s], resources: [%s], verbs: [%s]} %s (%s lists every rule it needs); the API server said: %s",
		r.Verb, r.Resource, scope, group, r.Resource, r.Verb, scope, RBACManifests, said)
}
