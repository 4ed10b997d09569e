package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/test/fakecloud"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
	"github.com/bootimage-operator/bootimage-operator/test/testenv"
)

// asMain, set in a child's environment, makes the test binary run bootimagectl's main with its
// arguments: for what only a fresh process shows (~/.kube/config is found from $HOME at start).
const asMain = "BOOTIMAGECTL_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asMain) == "1" {
		os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// runMain runs bootimagectl in a child process with env added to a minimal environment.
func runMain(env []string, args ...string) (int, string, string) {
	GinkgoHelper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append([]string{asMain + "=1", "PATH=" + os.Getenv("PATH")}, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), stdout.String(), stderr.String()
	}
	Expect(err).NotTo(HaveOccurred())
	return 0, stdout.String(), stderr.String()
}

var _ = Describe("bootimagectl as a kubectl-family tool", func() {
	DescribeTable("prints help on stdout and exits 0",
		func(want string, args ...string) {
			code, out, stderr := runCLI(args...)
			Expect(stderr).To(BeEmpty())
			Expect(code).To(Equal(exitOK))
			Expect(out).To(ContainSubstring(want))
		},
		Entry("--help", "Available Commands:", "--help"),
		Entry("no command", "Available Commands:"),
		Entry("help", "Available Commands:", "help"),
		Entry("help plan", "Usage:\n  bootimagectl plan [flags]", "help", "plan"),
		Entry("plan -h", "-o, --output string", "plan", "-h"),
		Entry("refresh -h: refresh's own help", "Usage:\n  bootimagectl refresh [flags]\n  bootimagectl refresh [command]", "refresh", "-h"),
		Entry("refresh alone", "Available Commands:\n  plan", "refresh"),
		Entry("refresh plan -h lists every flag, with no cluster given", "--pool string", "refresh", "plan", "-h"),
	)

	It("lists one flag set for refresh plan whatever else is given", func() {
		_, plain, _ := runCLI("refresh", "plan", "-h")
		_, withKubeconfig, _ := runCLI("refresh", "plan", "--kubeconfig", "k", "-h")
		Expect(plain).To(Equal(withKubeconfig))
		for _, flag := range []string{"-f, --filename", "--delete", "--pool", "--old", "--new", "--policies", "--no-reboot-paths", "--exit-code", "--kubeconfig", "--context"} {
			Expect(plain).To(ContainSubstring(flag))
		}
	})

	DescribeTable("names an unknown command or flag and exits 2",
		func(want string, args ...string) {
			code, out, stderr := runCLI(args...)
			Expect(out).To(BeEmpty())
			Expect(code).To(Equal(exitUnusable))
			Expect(stderr).To(ContainSubstring(want))
		},
		Entry("a command", `unknown command "plna" for "bootimagectl"`, "plna"),
		Entry("a refresh command", `unknown command "apply" for "bootimagectl refresh"`, "refresh", "apply"),
		Entry("a flag", "unknown flag: --kubeconfg", "plan", "--kubeconfg", "x"),
		Entry("an argument", `unknown command "extra" for "bootimagectl plan"`, "plan", "extra"),
	)

	It("prints its version", func() {
		code, out, _ := runCLI("version")
		Expect(code).To(Equal(exitOK))
		Expect(out).To(HavePrefix("bootimagectl "))
		code, out, _ = runCLI("version", "-o", "json")
		Expect(code).To(Equal(exitOK))
		Expect(out).To(ContainSubstring(`"goVersion": "go`))
	})

	It("says where it looked for a cluster when there is none", func() {
		code, _, stderr := runMain([]string{"HOME=" + GinkgoT().TempDir()}, "plan")
		Expect(code).To(Equal(exitUnusable))
		Expect(stderr).To(ContainSubstring("no cluster to read: give --kubeconfig, set $KUBECONFIG or write ~/.kube/config (or give -f FILE|DIR to plan files)"))
	})
})

// Ordered for its BeforeAll: one API server and its kubeconfig, which every spec only reads
// (each sets its own $KUBECONFIG and $HOME).
var _ = Describe("bootimagectl finds the cluster as kubectl does", Ordered, func() {
	ctx := context.Background()
	var env *testenv.Env
	var kubeconfig, dir string
	BeforeAll(func() {
		env = testenv.StartForSpecs(testenv.Options{})
		dir = GinkgoT().TempDir()
		kubeconfig = filepath.Join(dir, "kubeconfig")
		Expect(env.WriteKubeconfig(kubeconfig)).To(Succeed())
		Expect(fixtures.Create(ctx, env.Client, append(planCluster(), planMachineSets()...)...)).To(Succeed())
	})
	// planned runs a plan and says whether it read the cluster.
	planned := func(code int, out, stderr string) {
		GinkgoHelper()
		Expect(stderr).To(BeEmpty())
		Expect(code).To(Equal(exitOK))
		Expect(parsePlan(out).Items).To(ContainElement(HaveField("Name", "worker-a")))
	}

	It("reads the files of a $KUBECONFIG list", func() {
		GinkgoT().Setenv("KUBECONFIG", filepath.Join(dir, "missing")+string(os.PathListSeparator)+kubeconfig)
		planned(runCLI("plan", "--offline", "-o", "json"))
	})

	It("reads ~/.kube/config when $KUBECONFIG is not set", func() {
		home := GinkgoT().TempDir()
		Expect(os.Mkdir(filepath.Join(home, ".kube"), 0o700)).To(Succeed())
		data, err := os.ReadFile(kubeconfig)
		Expect(err).NotTo(HaveOccurred())
		Expect(os.WriteFile(filepath.Join(home, ".kube", "config"), data, 0o600)).To(Succeed())
		planned(runMain([]string{"HOME=" + home}, "plan", "--offline", "-o", "json"))
	})

	It("uses --context over the current-context", func() {
		cfg, err := clientcmd.LoadFromFile(kubeconfig)
		Expect(err).NotTo(HaveOccurred())
		good := cfg.CurrentContext
		cfg.Clusters["nowhere"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
		cfg.Contexts["nowhere"] = &clientcmdapi.Context{Cluster: "nowhere", AuthInfo: cfg.Contexts[good].AuthInfo}
		cfg.CurrentContext = "nowhere"
		two := filepath.Join(dir, "two-contexts")
		Expect(clientcmd.WriteToFile(*cfg, two)).To(Succeed())

		code, _, stderr := runCLI("plan", "--kubeconfig", two, "--offline")
		Expect(code).To(Equal(exitUnusable))
		Expect(stderr).To(ContainSubstring("127.0.0.1:1"))
		planned(runCLI("plan", "--kubeconfig", two, "--context", good, "--offline", "-o", "json"))
		code, _, stderr = runCLI("plan", "--kubeconfig", two, "--context", "typo")
		Expect(code).To(Equal(exitUnusable))
		Expect(stderr).To(ContainSubstring(`context "typo" does not exist`))
	})

	It("previews the README's chrony MachineConfig on the demo's worker pool, finding the cluster by $KUBECONFIG alone", func() {
		c, err := client.New(env.Config, client.Options{Scheme: liveScheme()})
		Expect(err).NotTo(HaveOccurred())
		Expect(fixtures.Create(ctx, c, fixtures.WorkerPoolObjects()...)).To(Succeed())
		GinkgoT().Setenv("KUBECONFIG", kubeconfig)
		chrony := filepath.Join("..", "..", "test", "fixtures", "testdata", "99-worker-chrony.yaml")
		code, out, stderr := runCLI("refresh", "plan", "-f", chrony)
		Expect(stderr).To(BeEmpty())
		Expect(code).To(Equal(exitOK))
		Expect(out).To(ContainSubstring("Pool worker: 3 machines, 1 at a time, from rendered-worker-1\nOutcome: Reboot\n"))
		Expect(out).To(ContainSubstring("file  /etc/chrony.conf  Reboot    no file policy matches /etc/chrony.conf"))
		code, _, _ = runCLI("refresh", "plan", "-f", chrony, "--exit-code")
		Expect(code).To(Equal(exitReboot))
	})

	It("makes a row whose cloud lookup fails an Error CloudLookupFailed, plans the rest and exits 1", func() {
		ec2 := fakecloud.NewEC2(fixtures.AWSImages())
		DeferCleanup(ec2.Close)
		ec2.Unavailable.Store(true)
		useEC2(ctx, env, ec2)
		Expect(fixtures.Create(ctx, env.Client, fixtures.AWSCredentialsSecret())).To(Succeed())

		code, out, stderr := runCLI("plan", "--kubeconfig", kubeconfig, "-o", "json")
		Expect(stderr).To(BeEmpty())
		Expect(code).To(Equal(exitItemErr))
		p := parsePlan(out)
		Expect(p.Items).To(ContainElements(
			And(HaveField("Name", "worker-a"), HaveField("Action", bootimage.Error), HaveField("Reason", bootimage.ReasonCloudLookupFailed),
				HaveField("Message", ContainSubstring("Unavailable")), HaveField("Current", fixtures.OldAWSAMI)),
			And(HaveField("Name", "current"), HaveField("Action", bootimage.NoChange)),
			And(HaveField("Name", "owned"), HaveField("Reason", bootimage.ReasonOwnedByController)),
		))

		_, table, _ := runCLI("plan", "--kubeconfig", kubeconfig)
		Expect(table).To(MatchRegexp(`(?m)^machineset/worker-a +Error +CloudLookupFailed +ami-0aaaaaaaaaaaaaa01 +-$`))
	})
})

var _ = Describe("bootimagectl refresh plan on files", func() {
	write := specFiles()

	It("names an unknown field of a MachineConfig, as on a cluster", func() {
		old := write("old.json", `{"ignition":{"version":"3.2.0"}}`)
		mc := write("mc.yaml", "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata: {name: 99-x}\nspec: {kernelArgs: [nosmt]}\n")
		code, out, stderr := runCLI("refresh", "plan", "--old", old, "--new", mc)
		Expect(out).To(BeEmpty())
		Expect(code).To(Equal(exitUnusable))
		Expect(stderr).To(ContainSubstring(`unknown field "spec.kernelArgs"`))
	})

	DescribeTable("with --exit-code, exits by the outcome",
		func(updated string, withFlag, without int) {
			old := write("old.json", `{"ignition":{"version":"3.2.0"}}`)
			next := write("new.json", updated)
			code, _, stderr := runCLI("refresh", "plan", "--old", old, "--new", next, "--exit-code")
			Expect(stderr).To(BeEmpty())
			Expect(code).To(Equal(withFlag))
			code, _, _ = runCLI("refresh", "plan", "--old", old, "--new", next)
			Expect(code).To(Equal(without))
		},
		Entry("NoChange", `{"ignition":{"version":"3.2.0"}}`, exitOK, exitOK),
		Entry("InPlace", `{"ignition":{"version":"3.2.0"},"storage":{"files":[{"path":"/var/lib/kubelet/config.json","contents":{"source":"data:,x"}}]}}`, exitOK, exitOK),
		Entry("Reboot", `{"ignition":{"version":"3.2.0"},"storage":{"files":[{"path":"/etc/motd","contents":{"source":"data:,x"}}]}}`, exitReboot, exitOK),
		Entry("Reject", `{"ignition":{"version":"3.2.0"},"storage":{"directories":[{"path":"/etc/app"}]}}`, exitReject, exitOK),
	)

	It("prints YAML with -o yaml", func() {
		p := write("c.json", `{"ignition":{"version":"3.2.0"}}`)
		code, out, _ := runCLI("refresh", "plan", "--old", p, "--new", p, "-o", "yaml")
		Expect(code).To(Equal(exitOK))
		Expect(out).To(Equal("actions: []\nchanges: []\noutcome: NoChange\n"))
	})

	It("refuses cluster flags beside --old/--new", func() {
		p := write("c.json", `{"ignition":{"version":"3.2.0"}}`)
		code, _, stderr := runCLI("refresh", "plan", "--old", p, "--new", p, "--pool", "worker")
		Expect(code).To(Equal(exitUnusable))
		Expect(stderr).To(ContainSubstring("give one or the other"))
	})
})

// No user-facing line shows Go's formatting of maps or slices.
var _ = It("bootimagectl help shows no Go formatting", func() {
	for _, args := range [][]string{{"--help"}, {"plan", "--help"}, {"refresh", "plan", "--help"}, {"version", "--help"}} {
		_, out, _ := runCLI(args...)
		Expect(out).NotTo(Or(ContainSubstring("map["), ContainSubstring("[]")), strings.Join(args, " "))
	}
})
