package runbooks_test

import (
	"bytes"
	"os/exec"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/types"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
)

// placeholders are the runbooks' stand-ins for an object's name, and the seeded objects' names.
var placeholders = map[string]string{"NAME": machineSet, "MACHINE": machine, "N": "2"}

// programs are the programs a runbook command may run; any other fails the spec, so a command
// this suite has no binary for cannot slip in.
var programs = map[string]bool{"oc": true, "bootimagectl": true, "jq": true, "grep": true}

// writeVerbs are the oc verbs that change the cluster: their lines run after every read.
var writeVerbs = map[string]bool{"patch": true, "annotate": true, "label": true, "scale": true, "apply": true, "create": true, "delete": true, "edit": true}

// expectation is what a runbook command must do beyond exiting 0: print what stdout matches
// (a read), or have effect (a write), after before has set the state it needs. A mention names
// a program in prose and is not run.
type expectation struct {
	stdout  types.GomegaMatcher
	before  func()
	effect  func()
	mention bool
}

const (
	degradedMessage = `oc get machineconfiguration cluster -o jsonpath='{.status.conditions[?(@.type=="BootImageUpdateDegraded")].message}{"\n"}'`
	clearHold       = `oc annotate machinesets.machine.openshift.io/NAME -n openshift-machine-api bootimage.openshift.io/hold-`
	toManual        = `oc patch machineconfiguration cluster --type=merge -p '{"spec":{"bootImageSkewEnforcement":{"mode":"Manual","manual":{"mode":"OCPVersion","ocpVersion":"4.20.0"}}}}'`
	warnings        = `oc get events -n openshift-machine-api --field-selector type=Warning`
	history         = `bootimagectl history machineset/NAME -n openshift-machine-api`
	plan            = `bootimagectl plan`
)

// expectations holds every runbook command line, as written (placeholders kept), and what it
// must do on the seeded cluster: a new command fails the suite until it is added here.
var expectations = map[string]expectation{
	plan: {stdout: MatchRegexp(`(?m)^machineset/` + machineSet + ` +Skip +BootImageHeld `)},
	`bootimagectl plan -o json | jq '.items[] | select(.action == "Error" or (.action == "Skip" and .reason != "NotSelected")) | {kind, namespace, name, reason, current, target}'`: {
		stdout: MatchRegexp(`"name": "` + machineSet + `",\s+"reason": "BootImageHeld"`)},
	`oc get machinesets.machine.openshift.io -A -l bootimage.openshift.io/canary=true`: {
		stdout: BeEmpty()},
	history: {stdout: And(
		MatchRegexp(`(?m)^\S+ +operator +`+fixtures.OldGCPImage+` +`+fixtures.NewGCPImage+` +Failed +`+machine+` +error launching instance`),
		MatchRegexp(`(?m)^\S+ +restore +`+fixtures.NewGCPImage+` +`+fixtures.OldGCPImage+` `))},
	`oc scale machinesets.machine.openshift.io/NAME -n openshift-machine-api --replicas=N`: {effect: func() {
		Expect(getMachineSet().Spec.Replicas).To(HaveValue(BeEquivalentTo(2)))
	}},
	`oc get events -n openshift-machine-api --field-selector reason=BootImageRestored`: {
		stdout: ContainSubstring("Restored boot image " + fixtures.OldGCPImage + " after machine " + machine + " failed on " + fixtures.NewGCPImage)},
	degradedMessage: {stdout: ContainSubstring("1 restored to the previous boot image and held: MachineSet openshift-machine-api/" + machineSet)},
	`oc get machinesets.machine.openshift.io NAME -n openshift-machine-api -o jsonpath='{.metadata.annotations.bootimage\.openshift\.io/hold}{"\n"}'`: {
		stdout: And(ContainSubstring(`"target":"`+fixtures.NewGCPImage+`"`), ContainSubstring(`"machine":"`+machine+`"`))},
	`bootimagectl history machineset.cluster.x-k8s.io/NAME`: {
		stdout: MatchRegexp(`^AT +BY +FROM +TO +OUTCOME +MACHINE +ERROR\n$`)},
	`oc get machines.machine.openshift.io MACHINE -n openshift-machine-api -o jsonpath='{.status.errorMessage}{"\n"}{.status.providerStatus.conditions}{"\n"}'`: {
		stdout: HavePrefix(gcpImageNotFound + "\n")},
	clearHold: {before: holdByRestore, effect: func() {
		Expect(getMachineSet().Annotations).NotTo(HaveKey(bootimage.HoldAnnotation))
		Eventually(gcpImage).Should(Equal(fixtures.NewGCPImage), "the operator writes the held target again")
	}},
	`oc label machinesets.machine.openshift.io/NAME -n openshift-machine-api bootimage.openshift.io/canary=true`: {effect: func() {
		Expect(getMachineSet().Labels).To(HaveKeyWithValue("bootimage.openshift.io/canary", "true"))
	}},
	`oc annotate machineconfiguration cluster bootimage.openshift.io/verification-deadline=30m --overwrite`: {effect: func() {
		Expect(machineConfiguration().Annotations).To(HaveKeyWithValue(bootimage.VerificationDeadlineAnnotation, "30m"))
	}},
	`oc annotate machineconfiguration cluster bootimage.openshift.io/verification=Disabled --overwrite`: {effect: func() {
		Expect(machineConfiguration().Annotations).To(HaveKeyWithValue(bootimage.VerificationAnnotation, "Disabled"))
	}},
	`oc get co machine-config -o jsonpath='{.status.conditions[?(@.type=="Upgradeable")].message}{"\n"}'`: {
		stdout: HavePrefix("Upgrades are blocked because boot image updates are failing: ")},
	`oc get machineconfiguration cluster -o jsonpath='{.status.bootImageSkewEnforcementStatus}{"\n"}'`: {
		stdout: ContainSubstring(`"mode":"Automatic"`)},
	`oc get events -A --field-selector reason=ClusterBootImageSkewError`: {
		stdout: MatchRegexp(`(?m)^default +\S+ +Warning +ClusterBootImageSkewError +machineconfiguration/cluster +Upgrades are blocked`)},
	warnings: {
		stdout: ContainSubstring("BootImageRestored")},
	`oc get events -A --field-selector involvedObject.kind=MachineConfiguration,type=Warning`: {
		stdout: MatchRegexp(`(?m)^default +\S+ +Warning +ClusterBootImageSkewError +machineconfiguration/cluster `)},
	`oc get co machine-config`: {
		stdout: MatchRegexp(`(?m)^machine-config `)},
	`bootimagectl plan -o json | jq '.items[] | select(.action == "Error" or .reason == "BootImageHeld")'`: {
		stdout: MatchRegexp(`"name": "` + machineSet + `"`)},
	`oc get machinesets.machine.openshift.io -n openshift-machine-api -o jsonpath='{range .items[?(@.metadata.annotations.bootimage\.openshift\.io/hold)]}{.metadata.name}{"\t"}{.metadata.annotations.bootimage\.openshift\.io/hold}{"\n"}{end}'`: {
		stdout: MatchRegexp(`^` + machineSet + `\t\{.*"target":"` + fixtures.NewGCPImage + `"`)},
	`bootimagectl history`: {mention: true},
	// Runs after the hold is cleared and the operator has written the target again.
	`bootimagectl restore machineset/NAME -n openshift-machine-api`: {
		stdout: ContainSubstring("Nothing written. To write it: bootimagectl restore machineset/" + machineSet + " --apply"),
		effect: func() { Expect(getMachineSet().Annotations).NotTo(HaveKey(bootimage.HoldAnnotation)) }},
	`oc get events -n openshift-machine-api --field-selector reason=HotLoopDetected`: {
		stdout: BeEmpty()},
	`oc get machinesets.machine.openshift.io -n openshift-machine-api NAME -o jsonpath='{.metadata.annotations.bootimage\.openshift\.io/update-attempts}{"\n"}'`: {
		stdout: MatchRegexp(`^\{"target":"` + fixtures.NewGCPImage + `","count":1,"selection":"[0-9a-f]+"\}\n$`)},
	`oc get machinesets.machine.openshift.io -n openshift-machine-api NAME --show-managed-fields -o yaml | grep -B2 -A12 'manager:'`: {
		stdout: ContainSubstring("manager: ")},
	`oc get machineconfiguration cluster -o jsonpath='{.status.bootImageSkewEnforcementStatus.mode}'`: {
		stdout: Equal("Automatic")},
	toManual: {effect: func() {
		Eventually(func() operatorv1.BootImageSkewEnforcementModeStatus {
			return machineConfiguration().Status.BootImageSkewEnforcementStatus.Mode
		}).Should(Equal(operatorv1.BootImageSkewEnforcementModeStatusManual))
	}},
	`oc label machinesets.machine.openshift.io -n openshift-machine-api NAME bootimage.example.com/skip=true`: {effect: func() {
		Expect(getMachineSet().Labels).To(HaveKeyWithValue("bootimage.example.com/skip", "true"))
	}},
	`oc patch machineconfiguration cluster --type=merge -p '{"spec":{"managedBootImages":{"machineManagers":[{"resource":"machinesets","apiGroup":"machine.openshift.io","selection":{"mode":"Partial","partial":{"machineResourceSelector":{"matchExpressions":[{"key":"bootimage.example.com/skip","operator":"DoesNotExist"}]}}}}]}}}'`: {
		effect: func() { Eventually(eventReasons).Should(ContainElement(bootimage.ReasonNotSelected)) }},
	`oc label machinesets.machine.openshift.io -n openshift-machine-api NAME bootimage.example.com/skip-`: {effect: func() {
		Expect(getMachineSet().Labels).NotTo(HaveKey("bootimage.example.com/skip"))
	}},
}

var _ = Describe("The runbooks' commands", Ordered, ContinueOnFailure, func() {
	commands, err := runbookCommands()
	It("are read from docs/runbooks", func() {
		Expect(err).NotTo(HaveOccurred())
		Expect(commands).NotTo(BeEmpty())
	})
	It("are each in the expectations table, which has no other", func() {
		seen := map[string]bool{}
		for _, c := range commands {
			seen[c.text] = true
		}
		var stale []string
		for text := range expectations {
			if !seen[text] {
				stale = append(stale, text)
			}
		}
		Expect(stale).To(BeEmpty(), "the expectations table names commands no runbook has")
	})
	// Every read first, on the held MachineSet; then the writes, in runbook order.
	for _, writes := range []bool{false, true} {
		for _, c := range commands {
			if isWrite(c.text) != writes {
				continue
			}
			It(c.runbook+": "+c.text, func() { runCommand(c) })
		}
	}
})

// isWrite tells whether line changes the cluster.
func isWrite(line string) bool {
	for _, s := range stages(line) {
		f := strings.Fields(s)
		if len(f) > 1 && f[0] == "oc" && writeVerbs[f[1]] {
			return true
		}
		// Without --apply a restore writes nothing, but it plans from the change it would undo:
		// it runs among the writes, once one of them has let the operator change the object.
		if len(f) > 1 && f[0] == "bootimagectl" && f[1] == "restore" {
			return true
		}
	}
	return false
}

func runCommand(c command) {
	line, err := substitute(c.text, placeholders)
	Expect(err).NotTo(HaveOccurred(), "%s: %s", c.runbook, c.text)
	for _, s := range stages(line) {
		program := strings.Fields(s)[0]
		Expect(programs).To(HaveKey(program), "%s runs %s, which this suite does not provide: %s", c.runbook, program, c.text)
	}
	want, ok := expectations[c.text]
	Expect(ok).To(BeTrue(), "%s has a command the expectations table lacks: add what it must do on the seeded cluster:\n%s", c.runbook, c.text)
	if want.mention {
		return
	}
	Expect(isWrite(c.text) == (want.effect != nil)).To(BeTrue(), "a write needs an effect to check, a read none:\n%s", c.text)
	if strings.Contains(line, "| jq ") && !hasJQ {
		Skip("jq is not installed on this machine; not run: " + c.text)
	}
	if want.before != nil {
		want.before()
	}
	code, stdout, stderr := shell(line)
	Expect(code).To(Equal(0), "%s\nstdout:\n%s\nstderr:\n%s", line, stdout, stderr)
	if want.stdout != nil {
		Expect(stdout).To(want.stdout, "%s\nstderr:\n%s", line, stderr)
	}
	if want.effect != nil {
		want.effect()
	}
}

// shell runs line with bash, a failure anywhere in a pipeline failing it.
func shell(line string) (int, string, string) {
	GinkgoHelper()
	cmd := exec.Command("bash", "-o", "pipefail", "-c", line)
	cmd.Env = shellEnv
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), stdout.String(), stderr.String()
	}
	Expect(err).NotTo(HaveOccurred(), line)
	return 0, stdout.String(), stderr.String()
}

// holdByRestore holds the MachineSet, when nothing does, by restoring it with bootimagectl once
// the operator has updated it again.
func holdByRestore() {
	GinkgoHelper()
	if _, held := getMachineSet().Annotations[bootimage.HoldAnnotation]; held {
		return
	}
	Eventually(gcpImage).Should(Equal(fixtures.NewGCPImage))
	code, stdout, stderr := shell("bootimagectl restore machineset/" + machineSet + " -n openshift-machine-api --apply")
	Expect(code).To(Equal(0), "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	Expect(getMachineSet().Annotations).To(HaveKey(bootimage.HoldAnnotation))
}

func machineConfiguration() *operatorv1.MachineConfiguration {
	GinkgoHelper()
	mc := &operatorv1.MachineConfiguration{}
	Expect(env.Client.Get(ctx, client.ObjectKey{Name: "cluster"}, mc)).To(Succeed())
	return mc
}

// eventReasons are the reasons of the Events about the seeded MachineSet.
func eventReasons() []string {
	list := &corev1.EventList{}
	Expect(env.Client.List(ctx, list, client.InNamespace(fixtures.MachineAPINamespace))).To(Succeed())
	var out []string
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == "MachineSet" && e.InvolvedObject.Name == machineSet {
			out = append(out, e.Reason)
		}
	}
	return out
}
