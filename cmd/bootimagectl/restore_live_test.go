package main

import (
	"context"
	"encoding/json"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/controllers"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
	"github.com/bootimage-operator/bootimage-operator/test/testenv"
)

var _ = Describe("bootimagectl history and restore on a cluster", Ordered, func() {
	ctx := context.Background()
	var env *testenv.Env
	var kubeconfig string
	key := types.NamespacedName{Namespace: fixtures.MachineAPINamespace, Name: "worker-r"}
	image := func() any {
		ms := &machinev1beta1.MachineSet{}
		Expect(env.Client.Get(ctx, key, ms)).To(Succeed())
		var ps map[string]any
		Expect(json.Unmarshal(ms.Spec.Template.Spec.ProviderSpec.Value.Raw, &ps)).To(Succeed())
		return ps["disks"].([]any)[0].(map[string]any)["image"]
	}
	annotations := func() map[string]string {
		ms := &machinev1beta1.MachineSet{}
		Expect(env.Client.Get(ctx, key, ms)).To(Succeed())
		return ms.Annotations
	}
	BeforeAll(func() {
		env = testenv.StartForSpecs(testenv.Options{})
		kubeconfig = filepath.Join(GinkgoT().TempDir(), "kubeconfig")
		Expect(env.WriteKubeconfig(kubeconfig)).To(Succeed())
		Expect(fixtures.Create(ctx, env.Client, append(fixtures.GCPCluster(), fixtures.MachineSet("worker-r", fixtures.GCPProviderSpec(fixtures.OldGCPImage)))...)).To(Succeed())
		mgr, err := env.StartOperator(controllers.Options{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(mgr.Stop)
		Eventually(image).Should(Equal(fixtures.NewGCPImage))
	})

	It("shows the operator's change", func() {
		code, out, stderr := runCLI("history", "machineset/worker-r", "-n", "openshift-machine-api", "--kubeconfig", kubeconfig)
		Expect(stderr).To(BeEmpty())
		Expect(code).To(Equal(0))
		Expect(out).To(MatchRegexp(`(?m)^AT +BY +FROM +TO +OUTCOME +MACHINE +ERROR\n\S+ +operator +` + fixtures.OldGCPImage + ` +` + fixtures.NewGCPImage + ` +Pending +- +-\n$`))
	})

	It("plans a restore without writing it, then writes it and holds the image, which the operator honours", func() {
		before := annotations()
		code, out, stderr := runCLI("restore", "machineset/worker-r", "--kubeconfig", kubeconfig)
		Expect(stderr).To(BeEmpty())
		Expect(code).To(Equal(0))
		Expect(out).To(ContainSubstring("machineset/worker-r: boot image " + fixtures.NewGCPImage + " -> " + fixtures.OldGCPImage))
		Expect(out).To(ContainSubstring("Nothing written. To write it: bootimagectl restore machineset/worker-r --apply"))
		Expect(annotations()).To(Equal(before))

		code, out, stderr = runCLI("restore", "machineset/worker-r", "--apply", "--kubeconfig", kubeconfig)
		Expect(stderr).To(BeEmpty())
		Expect(code).To(Equal(0))
		Expect(out).To(ContainSubstring("Restored. Clear the hold with: oc annotate machineset.machine.openshift.io/worker-r -n openshift-machine-api bootimage.openshift.io/hold-"))
		Expect(image()).To(Equal(fixtures.OldGCPImage))
		Expect(annotations()).To(HaveKeyWithValue(bootimage.HoldAnnotation, ContainSubstring(`"target":"`+fixtures.NewGCPImage+`"`)))

		// The operator says it holds the object there, and writes nothing.
		Eventually(func() []string {
			list := &corev1.EventList{}
			Expect(env.Client.List(ctx, list, client.InNamespace(fixtures.MachineAPINamespace))).To(Succeed())
			var reasons []string
			for _, e := range list.Items {
				if e.InvolvedObject.Name == "worker-r" {
					reasons = append(reasons, e.Reason)
				}
			}
			return reasons
		}).Should(ContainElement(bootimage.ReasonBootImageHeld))
		Expect(image()).To(Equal(fixtures.OldGCPImage))
		code, out, _ = runCLI("plan", "--kubeconfig", kubeconfig)
		Expect(code).To(Equal(0))
		Expect(out).To(MatchRegexp(`worker-r +Skip +BootImageHeld`))

		code, _, stderr = runCLI("restore", "machineset/worker-r", "--kubeconfig", kubeconfig)
		Expect(code).To(Equal(exitUnusable), "a restore is not undone by another")
		Expect(stderr).To(ContainSubstring("no boot image change to undo"))
	})

	It("updates the object again once the hold is cleared", func() {
		ms := &machinev1beta1.MachineSet{}
		Expect(env.Client.Get(ctx, key, ms)).To(Succeed())
		delete(ms.Annotations, bootimage.HoldAnnotation)
		Expect(env.Client.Update(ctx, ms)).To(Succeed())
		Eventually(image).Should(Equal(fixtures.NewGCPImage))
	})
})
