// Package embeddedrbac runs controllers.AddToManager as the machine-config-controller's
// ServiceAccount, holding only the MCC's own roles (openshift/machine-config-operator
// manifests/machineconfigcontroller/ at 7ff337a4, the rules the operator touches) plus the
// documented embedded RBAC (manifests/embedded/, rendered as the MCO renders its manifests).
package embeddedrbac_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/controllers"
	"github.com/bootimage-operator/bootimage-operator/internal/kube"
	"github.com/bootimage-operator/bootimage-operator/internal/seams"
	"github.com/bootimage-operator/bootimage-operator/internal/status"
	"github.com/bootimage-operator/bootimage-operator/manifests"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
	"github.com/bootimage-operator/bootimage-operator/test/testenv"
)

const mccServiceAccount = "machine-config-controller"

var ctx = context.Background()

func TestEmbeddedRBAC(t *testing.T) {
	testenv.RunSpecs(t, "controllers.AddToManager under the machine-config-controller's RBAC", testenv.Waits{Timeout: 30 * time.Second})
}

// mccRules are the rules of the MCC's ClusterRole at 7ff337a4 on what the operator reads or
// writes; its other rules (MachineConfigs, pods, builds, ...) change nothing here.
var mccRules = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch", "patch", "update"}},
	{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch", "create", "update", "delete"}},
	{APIGroups: []string{"config.openshift.io"}, Resources: []string{"images", "clusterversions", "featuregates", "nodes", "schedulers", "apiservers", "infrastructures"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{"operator.openshift.io"}, Resources: []string{"machineconfigurations"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{"operator.openshift.io"}, Resources: []string{"machineconfigurations/status"}, Verbs: []string{"get", "update"}},
	{APIGroups: []string{"machine.openshift.io"}, Resources: []string{"machinesets", "machines", "controlplanemachinesets"}, Verbs: []string{"get", "list", "watch", "patch"}},
	{APIGroups: []string{"machineconfiguration.openshift.io"}, Resources: []string{"machineconfigpools", "osimagestreams"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
	{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create", "get", "update"}},
}

// grantMCC creates the MCC's roles and bindings (mccObjects).
func grantMCC(c client.Client) {
	for _, o := range mccObjects() {
		Expect(c.Create(ctx, o)).To(Succeed())
	}
}

// mccObjects are the MCC's roles and bindings: its ClusterRole, its Events role bound in default
// and its own namespace, its ConfigMaps role in its own namespace, its install-config role in
// kube-system.
func mccObjects() []client.Object {
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: kube.MCONamespace, Name: mccServiceAccount}}
	objs := []client.Object{
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "machine-config-controller"}, Rules: mccRules},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "machine-config-controller"}, Subjects: subject,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "machine-config-controller"}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "machine-config-controller-events"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}}}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: kube.MCONamespace, Name: "machine-config-controller-configmaps"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "create", "update", "delete"}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: kube.MCONamespace, Name: "machine-config-controller-configmaps"}, Subjects: subject,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "machine-config-controller-configmaps"}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "machine-config-controller-install-config"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"cluster-config-v1"}, Verbs: []string{"get"}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "machine-config-controller-install-config"}, Subjects: subject,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "machine-config-controller-install-config"}},
	}
	for _, ns := range []string{"default", kube.MCONamespace} {
		objs = append(objs, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "machine-config-controller-events"}, Subjects: subject,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "machine-config-controller-events"}})
	}
	return objs
}

// grantEmbedded creates the documented embedded RBAC, after edit has had its way with each object.
func grantEmbedded(c client.Client, edit func(client.Object)) {
	grantEmbeddedIf(c, func(o client.Object) bool { edit(o); return true })
}

// grantEmbeddedIf creates the objects of the documented embedded RBAC, rendered for the MCC's
// namespace as the MCO renders them, that keep keeps, after it has had its way with them.
func grantEmbeddedIf(c client.Client, keep func(client.Object) bool) {
	created := 0
	for _, obj := range embeddedObjects() {
		if !keep(obj) {
			continue
		}
		Expect(c.Create(ctx, obj)).To(Succeed())
		created++
	}
	Expect(created).To(BeNumerically(">", 0))
}

// embeddedObjects are the objects of manifests/embedded/ rendered for the MCC's namespace, one
// a file, by file name.
func embeddedObjects() []client.Object {
	GinkgoHelper()
	files, err := manifests.RenderEmbedded(kube.MCONamespace)
	Expect(err).NotTo(HaveOccurred())
	var objs []client.Object
	for _, name := range slices.Sorted(maps.Keys(files)) {
		obj, err := embeddedObject(files[name])
		Expect(err).NotTo(HaveOccurred(), name)
		objs = append(objs, obj)
	}
	return objs
}

// embeddedObject decodes the one RBAC object of an embedded file.
func embeddedObject(data []byte) (client.Object, error) {
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var raw json.RawMessage
	if err := decoder.Decode(&raw); err != nil {
		return nil, err
	}
	var more json.RawMessage
	if err := decoder.Decode(&more); !errors.Is(err, io.EOF) {
		return nil, errors.New("more than one object: the MCO keeps one a file")
	}
	var meta metav1.TypeMeta
	if err := json.Unmarshal(raw, &meta); err != nil {
		return nil, err
	}
	var obj client.Object
	switch meta.Kind {
	case "ClusterRole":
		obj = &rbacv1.ClusterRole{}
	case "ClusterRoleBinding":
		obj = &rbacv1.ClusterRoleBinding{}
	case "Role":
		obj = &rbacv1.Role{}
	case "RoleBinding":
		obj = &rbacv1.RoleBinding{}
	default:
		return nil, errors.New("unexpected kind " + meta.Kind)
	}
	return obj, json.Unmarshal(raw, obj)
}

// asMCC starts the operator as the MCC's ServiceAccount.
func asMCC(env *testenv.Env) *testenv.Manager {
	return asMCCWith(env, seams.Hooks{}, controllers.Options{})
}

// asMCCWith is asMCC with hooks and options.
func asMCCWith(env *testenv.Env, hooks seams.Hooks, opts controllers.Options) *testenv.Manager {
	mcc := *env
	mcc.Config = rest.CopyConfig(env.Config)
	mcc.Config.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + kube.MCONamespace + ":" + mccServiceAccount}
	opts.ReleaseVersion = fixtures.ReleaseVersion
	mgr, err := mcc.StartOperatorWithHooks(hooks, opts)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(mgr.Stop)
	return mgr
}

func gcpImage(c client.Client, name string) func() string {
	return func() string {
		ms := &machinev1beta1.MachineSet{}
		Expect(c.Get(ctx, client.ObjectKey{Namespace: fixtures.MachineAPINamespace, Name: name}, ms)).To(Succeed())
		var ps map[string]any
		Expect(json.Unmarshal(ms.Spec.Template.Spec.ProviderSpec.Value.Raw, &ps)).To(Succeed())
		return ps["disks"].([]any)[0].(map[string]any)["image"].(string)
	}
}

func eventsOf(c client.Client, reason string) func() []string {
	return func() []string {
		events := &corev1.EventList{}
		Expect(c.List(ctx, events)).To(Succeed())
		var out []string
		for _, e := range events.Items {
			if e.Reason == reason {
				out = append(out, e.InvolvedObject.Kind+"/"+e.InvolvedObject.Name+": "+e.Message)
			}
		}
		return out
	}
}

var _ = Describe("The operator inside the machine-config-controller", func() {
	var env *testenv.Env
	BeforeEach(func() {
		env = testenv.StartForSpecs(testenv.Options{})
		Expect(fixtures.Create(ctx, env.Client, fixtures.GCPCluster(
			fixtures.MachineSet("worker-a", fixtures.GCPProviderSpec(fixtures.OldGCPImage)))...)).To(Succeed())
		grantMCC(env.Client)
	})

	It("updates a MachineSet holding only the MCC's roles and the documented embedded RBAC", func() {
		grantEmbedded(env.Client, func(client.Object) {})
		asMCC(env)
		Eventually(gcpImage(env.Client, "worker-a")).Should(Equal(fixtures.NewGCPImage))
		Expect(eventsOf(env.Client, status.ReasonForbidden)()).To(BeEmpty())
		Expect(eventsOf(env.Client, status.ReasonSecondWriter)()).To(BeEmpty())
	})

	It("names the missing rule when a role lacks one, and never calls it a second writer", func() {
		grantEmbedded(env.Client, func(o client.Object) {
			if role, ok := o.(*rbacv1.ClusterRole); ok {
				for i := range role.Rules {
					role.Rules[i].Resources = slices.DeleteFunc(role.Rules[i].Resources, func(r string) bool { return r == "machineconfigurations/status" })
				}
			}
		})
		asMCC(env)
		Eventually(eventsOf(env.Client, status.ReasonForbidden)).Should(ContainElement(And(
			HavePrefix("MachineConfiguration/cluster: "),
			ContainSubstring("Forbidden to patch machineconfigurations/status"),
			ContainSubstring("{apiGroups: [operator.openshift.io], resources: [machineconfigurations/status], verbs: [patch]}"))))
		Expect(eventsOf(env.Client, status.ReasonSecondWriter)()).To(BeEmpty())
		Expect(gcpImage(env.Client, "worker-a")()).To(Equal(fixtures.OldGCPImage), "the boot image reconcilers wait for the status")
	})
})
