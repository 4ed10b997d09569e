package embeddedrbac_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/internal/kube"
	"github.com/bootimage-operator/bootimage-operator/manifests"
)

// grant is one verb on one resource, in one namespace ("" for every namespace), of one name (""
// for any).
type grant struct{ namespace, group, resource, verb, name string }

func (g grant) String() string {
	ns := g.namespace
	if ns == "" {
		ns = "cluster-wide"
	}
	what := g.resource
	if g.group != "" {
		what += "." + g.group
	}
	if g.name != "" {
		what += " " + g.name
	}
	return fmt.Sprintf("%s %s %s", g.verb, what, ns)
}

// covers says whether one of grants allows g.
func covers(grants []grant, g grant) bool {
	return slices.ContainsFunc(grants, func(h grant) bool {
		return h.group == g.group && h.resource == g.resource && h.verb == g.verb &&
			(h.namespace == "" || h.namespace == g.namespace) && (h.name == "" || h.name == g.name)
	})
}

// grantsTo flattens what objs grant the ServiceAccount namespace/name: a ClusterRole bound by a
// ClusterRoleBinding everywhere, by a RoleBinding in its namespace; a Role in its namespace.
func grantsTo(objs []client.Object, namespace, name string) (grants []grant) {
	clusterRoles, roles := map[string][]rbacv1.PolicyRule{}, map[string][]rbacv1.PolicyRule{}
	for _, o := range objs {
		switch o := o.(type) {
		case *rbacv1.ClusterRole:
			clusterRoles[o.Name] = o.Rules
		case *rbacv1.Role:
			roles[o.Namespace+"/"+o.Name] = o.Rules
		}
	}
	add := func(ns string, rules []rbacv1.PolicyRule) {
		for _, r := range rules {
			names := r.ResourceNames
			if len(names) == 0 {
				names = []string{""}
			}
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					for _, v := range r.Verbs {
						for _, n := range names {
							grants = append(grants, grant{ns, g, res, v, n})
						}
					}
				}
			}
		}
	}
	bound := func(subjects []rbacv1.Subject) bool {
		return slices.ContainsFunc(subjects, func(s rbacv1.Subject) bool {
			return s.Kind == rbacv1.ServiceAccountKind && s.Namespace == namespace && s.Name == name
		})
	}
	for _, o := range objs {
		switch o := o.(type) {
		case *rbacv1.ClusterRoleBinding:
			if bound(o.Subjects) && o.RoleRef.Kind == "ClusterRole" {
				add("", clusterRoles[o.RoleRef.Name])
			}
		case *rbacv1.RoleBinding:
			if !bound(o.Subjects) {
				continue
			}
			if o.RoleRef.Kind == "ClusterRole" {
				add(o.Namespace, clusterRoles[o.RoleRef.Name])
			} else {
				add(o.Namespace, roles[o.Namespace+"/"+o.RoleRef.Name])
			}
		}
	}
	return grants
}

// operatorObjects are the RBAC objects of the operator's own manifest.
func operatorObjects() []client.Object {
	GinkgoHelper()
	data, err := os.ReadFile(filepath.Join(manifests.RepoRoot(), "manifests", manifests.RBACFile))
	Expect(err).NotTo(HaveOccurred())
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []client.Object
	for {
		var raw json.RawMessage
		if err := decoder.Decode(&raw); errors.Is(err, io.EOF) {
			break
		} else {
			Expect(err).NotTo(HaveOccurred())
		}
		if obj, err := embeddedObject(raw); err == nil {
			objs = append(objs, obj)
		}
	}
	return objs
}

// standaloneOnly are what only the operator on its own uses: its Lease, its metrics endpoint's
// reviews and TLS profile, its ClusterOperator. Events are needed, but only where it records them.
var standaloneOnly = []string{"leases", "tokenreviews", "subjectaccessreviews", "apiservers", "clusteroperators", "clusteroperators/status", "events"}

// eventsNeeded are the Events the operator records and lists inside the MCC: on
// MachineConfiguration (cluster-scoped: namespace default), on Machine API and on Cluster API
// objects; it lists them where a cloud grace period is read back (kube.FirstSaid).
var eventsNeeded = func() []grant {
	var out []grant
	for _, ns := range []string{"default", kube.MachineAPINamespace, bootimage.ClusterAPINamespace} {
		verbs := []string{"create", "patch", "list"}
		if ns == "default" {
			verbs = verbs[:2]
		}
		for _, v := range verbs {
			out = append(out, grant{ns, "", "events", v, ""})
		}
	}
	return out
}()

var _ = Describe("The embedded RBAC", func() {
	It("is exactly what the MCC's own roles lack of what the operator needs, Cluster API included", func() {
		mcc := grantsTo(mccObjects(), kube.MCONamespace, mccServiceAccount)
		embedded := grantsTo(embeddedObjects(), kube.MCONamespace, mccServiceAccount)
		own := grantsTo(operatorObjects(), kube.MCONamespace, "bootimage-operator")
		needed := slices.DeleteFunc(own, func(g grant) bool { return slices.Contains(standaloneOnly, g.resource) })
		needed = append(needed, eventsNeeded...)
		Expect(needed).To(ContainElement(grant{bootimage.ClusterAPINamespace, "cluster.x-k8s.io", "machinesets", "patch", ""}), "Cluster API is part of what is needed")

		var missing, extra, redundant []string
		for _, g := range needed {
			if !covers(mcc, g) && !covers(embedded, g) {
				missing = append(missing, g.String())
			}
		}
		for _, g := range embedded {
			switch {
			case !covers(needed, g):
				extra = append(extra, g.String())
			case covers(mcc, g):
				redundant = append(redundant, g.String())
			}
		}
		Expect(missing).To(BeEmpty(), "needed, granted neither by the MCC nor by manifests/embedded/")
		Expect(extra).To(BeEmpty(), "granted by manifests/embedded/, needed by no controller")
		Expect(redundant).To(BeEmpty(), "granted by manifests/embedded/ and already by the MCC")
	})
})
