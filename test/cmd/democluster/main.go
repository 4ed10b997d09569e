// Command democluster is `make run`: it starts a local control plane, seeds a demo AWS cluster
// with outdated boot images, writes a kubeconfig, runs the operator against it and prints the
// Events the operator records, until Ctrl-C.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	machinev1 "github.com/openshift/api/machine/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/aws"
	"github.com/bootimage-operator/bootimage-operator/featuregates"
	"github.com/bootimage-operator/bootimage-operator/internal/kube"
	"github.com/bootimage-operator/bootimage-operator/internal/status"
	"github.com/bootimage-operator/bootimage-operator/manifests"
	"github.com/bootimage-operator/bootimage-operator/test/fakecloud"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
	"github.com/bootimage-operator/bootimage-operator/test/testenv"
)

const usage = `Usage: democluster

Starts a local kube-apiserver and etcd, seeds a demo AWS cluster with outdated boot images and a
local fake EC2, runs bootimage-operator against it and prints its Events and boot images, until
Ctrl-C. It writes bin/demo/kubeconfig and bin/demo/ec2-ca.pem for a second terminal, and refuses to
start while another demo runs. It takes no arguments: make run builds and starts it. The README's
tutorial says what to try.
`

func main() {
	switch help, err := parseArgs(os.Args[1:]); {
	case help:
		fmt.Print(usage)
		return
	case err != nil:
		fmt.Fprintf(os.Stderr, "democluster: %v\n\n%s", err, usage)
		os.Exit(2)
	}
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "democluster: %v\n", err)
		os.Exit(1)
	}
}

// parseArgs reads the command line: help, or nothing at all.
func parseArgs(args []string) (help bool, err error) {
	flags := flag.NewFlagSet("democluster", flag.ContinueOnError)
	flags.SetOutput(io.Discard)
	if err := flags.Parse(args); err != nil {
		return errors.Is(err, flag.ErrHelp), err
	}
	if flags.NArg() > 0 {
		return false, fmt.Errorf("unexpected argument %q", flags.Arg(0))
	}
	return false, nil
}

func run() error {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	// When the output is piped (make run | tee) and the reader goes away first, keep going so
	// the control plane is still stopped below.
	signal.Ignore(syscall.SIGPIPE)

	d, err := start(ctx, filepath.Join(manifests.RepoRoot(), "bin", "demo"))
	if err != nil {
		return err
	}
	defer d.stop()
	printBanner(d.seeded, d.ec2.URL, d.kubeconfig, d.caBundle)
	go printEvents(ctx, d.env)
	go printProgress(ctx, d.env)

	operator := d.operator(ctx, filepath.Join(manifests.RepoRoot(), "bin", "bootimage-operator"),
		"--metrics-bind-address", "0", "--health-probe-bind-address", "127.0.0.1:18081")
	operator.Stdout, operator.Stderr = os.Stdout, os.Stderr
	// Ctrl-C reaches the operator through the terminal; cancel covers other stops.
	operator.Cancel = func() error { return operator.Process.Signal(os.Interrupt) }
	say("Starting the operator (Ctrl-C stops everything)")
	if err := operator.Run(); err != nil && ctx.Err() == nil {
		return fmt.Errorf("operator: %w", err)
	}
	return nil
}

// demo is a running demo cluster: its control plane, its fake EC2 and the files a second
// terminal needs.
type demo struct {
	env                  *testenv.Env
	ec2                  *fakecloud.EC2
	seeded               []client.Object
	kubeconfig, caBundle string
	// lock is held while the demo runs, so a second one cannot overwrite its files.
	lock *os.File
}

// lockDemo takes dir's lock, or says which demo holds it: a second demo would overwrite the
// kubeconfig and CA a running one's second terminal uses.
func lockDemo(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		pid, _ := io.ReadAll(f)
		_ = f.Close()
		return nil, fmt.Errorf("a demo is already running (process %s holds %s): stop it with Ctrl-C in its terminal first", strings.TrimSpace(string(pid)), filepath.Join(dir, "lock"))
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// start starts kube-apiserver, etcd and the fake EC2, seeds the demo cluster and writes the
// kubeconfig and the EC2 CA into dir.
func start(ctx context.Context, dir string) (_ *demo, err error) {
	d := &demo{}
	defer func() {
		if err != nil {
			d.stop()
		}
	}()
	if d.lock, err = lockDemo(dir); err != nil {
		return nil, err
	}
	say("Starting kube-apiserver and etcd")
	if d.env, err = testenv.Start(testenv.Options{FeatureSet: manifests.TechPreviewNoUpgrade}); err != nil {
		return nil, err
	}
	// EC2 for the demo: a local endpoint speaking the EC2 Query API, which the operator reaches
	// through the real SDK, as on AWS, via the Infrastructure's ec2 service endpoint.
	d.ec2 = fakecloud.NewEC2(append(fixtures.AWSImages(), nextRHCOSAMI, installerCopy))
	// A copy of an AMI takes minutes on AWS; here, long enough to watch it pending.
	d.ec2.CopyTime = copyTime
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	d.caBundle = filepath.Join(dir, "ec2-ca.pem")
	if err := os.WriteFile(d.caBundle, d.ec2.CertificatePEM(), 0o600); err != nil {
		return nil, err
	}
	if d.seeded, err = seed(ctx, d.env, d.ec2.URL); err != nil {
		return nil, fmt.Errorf("seeding the demo cluster: %w", err)
	}
	d.kubeconfig = filepath.Join(dir, "kubeconfig")
	return d, d.env.WriteKubeconfig(d.kubeconfig)
}

// operator returns the command that runs the operator binary against the demo cluster, with
// args added to the demo's own.
func (d *demo) operator(ctx context.Context, binary string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, binary, append([]string{"--kubeconfig", d.kubeconfig, "--release-version", fixtures.ReleaseVersion}, args...)...)
	// The operator trusts the system's CAs, as in a pod where the cluster's bundle is mounted there.
	cmd.Env = append(os.Environ(), "SSL_CERT_FILE="+d.caBundle)
	return cmd
}

func (d *demo) stop() {
	if d == nil {
		return
	}
	if d.ec2 != nil {
		d.ec2.Close()
	}
	if d.env != nil {
		say("Stopping kube-apiserver and etcd")
		_ = d.env.Stop()
	}
	if d.lock != nil {
		_ = d.lock.Close() // releases the lock
	}
}

// nextRHCOSAMI is a newer RHCOS AMI in us-east-1 than the stream's, for "roll the stream".
var nextRHCOSAMI = aws.Image{ImageID: "ami-0b0b0b0b0b0b0b0b1", OwnerID: aws.RHCOSOwner, Name: "rhcos-9.6.20250801-0-x86_64",
	Description: "rhcos-9.6.20250801-0-x86_64", CreationDate: "2025-08-01T12:00:00.000Z", Region: "us-east-1", State: "available"}

// copyRegion has no rhel-10 AMI in the stream: its install copied an old rhel-10 us-east-1 AMI
// there, as the installer does, and named it by the tag:Name filter of copyName.
const (
	copyRegion = "eu-west-1"
	copyName   = "demo-x7k2p-rhel10-eu-west-1a"
	copyTime   = 10 * time.Second
)

// installerCopy is the installer's copy of an old rhel-10 AMI into copyRegion.
var installerCopy = aws.Image{ImageID: "ami-0c1c1c1c1c1c1c1c1", OwnerID: fakecloud.SelfAccount, Name: "demo-x7k2p-master", CreationDate: "2026-03-01T00:00:00.000Z",
	Region: copyRegion, State: "available", Tags: map[string]string{
		aws.TagName: aws.InstallerCopyName("demo-x7k2p", copyRegion), aws.OwnedTag("demo-x7k2p"): "owned",
		aws.TagSourceAMI: "ami-010a10a10a10a10a0", aws.TagSourceRegion: "us-east-1",
	}}

// copyCredentials is the operator's own AWS Secret, which the cloud credential operator writes
// from its CredentialsRequest: only it can copy AMIs.
func copyCredentials() *corev1.Secret {
	s := fixtures.AWSCredentialsSecret()
	s.Name = aws.CopyCredentialsSecret
	return s
}

// copyMachineSet is a rhel-10 MachineSet of copyRegion on the installer's copy.
func copyMachineSet() *machinev1beta1.MachineSet {
	ms := fixtures.MachineSet(copyName, strings.Replace(fixtures.AWSProviderSpecByFilter(copyRegion, "demo-x7k2p"), `"worker-user-data"`, `"rhel10-user-data"`, 1))
	fixtures.Labelled("rhel-10", &ms.Labels, &ms.Spec.Template.Labels)
	return ms
}

// seed creates the demo cluster: AWS, tech preview gates, a stable 4.20 release, an RHCOS stream
// newer than the MachineSets' images, one custom-image MachineSet, a CPMS, and a worker
// MachineConfigPool with its MachineConfigs and rendered config. It returns what it created.
func seed(ctx context.Context, env *testenv.Env, ec2URL string) ([]client.Object, error) {
	infra := fixtures.Infrastructure(configv1.AWSPlatformType)
	infra.Status.PlatformStatus.AWS.ServiceEndpoints = []configv1.AWSServiceEndpoint{{Name: "ec2", URL: ec2URL}}
	objs := []client.Object{
		infra,
		fixtures.AWSCredentialsSecret(), copyCredentials(),
		fixtures.FeatureGate(configv1.TechPreviewNoUpgrade, fixtures.ReleaseVersion, demoGates, nil),
		fixtures.ClusterVersion(fixtures.ReleaseVersion, true),
		// Opt the CPMS in: it defaults to None.
		fixtures.MachineConfiguration(&operatorv1.ManagedBootImages{MachineManagers: []operatorv1.MachineManager{
			fixtures.MachineManager(operatorv1.ControlPlaneMachineSets, operatorv1.All, nil),
		}}),
		// Both OS streams, as a 5.0 payload ships them; the cluster was upgraded from 4.x, so
		// rhel-9 is its default, and pool rhel10 runs rhel-10.
		fixtures.BootImagesConfigMap50(fixtures.Streams50(), fixtures.ReleaseVersion),
		fixtures.OSImageStream(bootimage.LegacyOSStream),
		fixtures.Pool("rhel10", "rhel-10"),
		fixtures.UserDataSecret("worker-user-data", fixtures.IgnitionStubV3),
		fixtures.UserDataSecret("rhel10-user-data", strings.Replace(fixtures.IgnitionStubV3, "/config/worker", "/config/rhel10", 1)),
		fixtures.MachineSet("demo-x7k2p-worker-us-east-1a", fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI)),
		fixtures.MachineSet("demo-x7k2p-worker-us-east-1b", fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI)),
		fixtures.MachineSet("demo-x7k2p-worker-us-west-2a", fixtures.AWSProviderSpec("us-west-2", fixtures.OldAWSAMI)),
		fixtures.MachineSet("demo-x7k2p-custom-us-east-1c", fixtures.AWSProviderSpec("us-east-1", fixtures.CustomAMI)),
		rhel10MachineSet(), copyMachineSet(),
		fixtures.ControlPlaneMachineSet(fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI), machinev1.ControlPlaneMachineSetStateActive),
	}
	objs = append(objs, fixtures.WorkerPoolObjects()...)
	// MachineConfigs are not in the operator's scheme: a client that knows them.
	scheme := kube.NewScheme()
	if err := mcfgv1.Install(scheme); err != nil {
		return nil, err
	}
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	return objs, fixtures.Create(ctx, c, objs...)
}

// rhel10MachineSet joins pool rhel10 and is labelled rhel-10, as a 5.0 installer labels its own.
func rhel10MachineSet() *machinev1beta1.MachineSet {
	ms := fixtures.MachineSet(rhel10Name, strings.Replace(fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI), `"worker-user-data"`, `"rhel10-user-data"`, 1))
	fixtures.Labelled("rhel-10", &ms.Labels, &ms.Spec.Template.Labels)
	return ms
}

const rhel10Name = "demo-x7k2p-rhel10-us-east-1d"

var demoGates = []configv1.FeatureGateName{featuregates.ManagedBootImagesCPMS, featuregates.BootImageSkewEnforcement}

// printBanner says what the demo cluster holds and what the second terminal needs.
func printBanner(objs []client.Object, ec2URL, kubeconfig, caBundle string) {
	var b strings.Builder
	fmt.Fprintf(&b, "Demo cluster ready: AWS cluster demo-x7k2p, release %s, feature set %s with gates %s\n", fixtures.ReleaseVersion, configv1.TechPreviewNoUpgrade, joinGates(demoGates))
	fmt.Fprintf(&b, "    Streams (ConfigMap openshift-machine-config-operator/coreos-bootimages): rhel-9 RHCOS %s, us-east-1 %s, us-west-2 %s; rhel-10 RHCOS %s, us-east-1 %s\n",
		fixtures.StreamRelease, fixtures.NewAWSAMIUSEast1, fixtures.NewAWSAMIUSWest2, fixtures.RHEL10Release, fixtures.RHEL10AWSAMIUSEast1)
	fmt.Fprintf(&b, "    OSImageStream cluster: default rhel-9 (upgraded from 4.x); MachineConfigPool rhel10: spec.osImageStream rhel-10\n")
	for _, o := range objs {
		switch t := o.(type) {
		case *machinev1beta1.MachineSet:
			ami, what := amiOf(t.Spec.Template.Spec.ProviderSpec.Value), "old RHCOS"
			if ami == fixtures.CustomAMI {
				what = "a custom AMI: left alone"
			}
			if ami == "" {
				ami, what = "tag:Name="+aws.InstallerCopyName("demo-x7k2p", copyRegion), fmt.Sprintf("the installer's copy of an old rhel-10 AMI: the stream has no rhel-10 AMI in %s, so a new copy is made", copyRegion)
			}
			if osStream := t.Labels[bootimage.OSStreamLabel]; osStream != "" {
				what += ", OS stream " + osStream
			}
			fmt.Fprintf(&b, "    MachineSet %s: %s (%s)\n", t.Name, ami, what)
		case *machinev1.ControlPlaneMachineSet:
			fmt.Fprintf(&b, "    ControlPlaneMachineSet %s: %s (old RHCOS; opted in, it defaults to None)\n", t.Name, amiOf(t.Spec.Template.OpenShiftMachineV1Beta1Machine.Spec.ProviderSpec.Value))
		case *mcfgv1.MachineConfigPool:
			if t.Status.Configuration.Name == "" {
				continue // rhel10: its stream is said above
			}
			fmt.Fprintf(&b, "    MachineConfigPool %s: %d machines on %s, from MachineConfigs %s\n", t.Name, t.Status.MachineCount, t.Status.Configuration.Name, sourceNames(t))
		}
	}
	fmt.Fprintf(&b, "    Fake EC2 at %s (the Infrastructure's ec2 endpoint): the AMIs above, and %s, a newer RHCOS in us-east-1; a copy is available %s after it starts\n", ec2URL, nextRHCOSAMI.ImageID, copyTime)
	fmt.Fprintf(&b, "\nIn another terminal, from %s:\n\n", manifests.RepoRoot())
	fmt.Fprintf(&b, "    export KUBECONFIG=%s\n", kubeconfig)
	fmt.Fprintf(&b, "    export SSL_CERT_FILE=%s   # the fake EC2's CA: bootimagectl trusts it as the operator does\n", caBundle)
	b.WriteString("    kubectl get machinesets -n openshift-machine-api\n")
	b.WriteString("    bin/bootimagectl plan\n")
	b.WriteString("\nThings to try: README.md, \"Things to try\".\n")
	say("%s", b.String())
}

func joinGates(gates []configv1.FeatureGateName) string {
	names := make([]string, len(gates))
	for i, g := range gates {
		names[i] = string(g)
	}
	return strings.Join(names, ", ")
}

func sourceNames(p *mcfgv1.MachineConfigPool) string {
	names := make([]string, len(p.Status.Configuration.Source))
	for i, s := range p.Status.Configuration.Source {
		names[i] = s.Name
	}
	return strings.Join(names, ", ")
}

// printEvents prints each Event recorded in the demo cluster as it happens.
func printEvents(ctx context.Context, env *testenv.Env) {
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		return
	}
	w, err := cs.CoreV1().Events("").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		if e, ok := ev.Object.(*corev1.Event); ok {
			say("Event %s %s %s/%s: %s", e.Type, e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message)
		}
	}
}

// printProgress prints the operator's progress as its conditions change, and a summary table
// each time it finishes a pass.
func printProgress(ctx context.Context, env *testenv.Env) {
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		return
	}
	w, err := wc.Watch(ctx, &operatorv1.MachineConfigurationList{})
	if err != nil {
		return
	}
	defer w.Stop()
	last := ""
	for ev := range w.ResultChan() {
		mc, ok := ev.Object.(*operatorv1.MachineConfiguration)
		if !ok {
			continue
		}
		c := meta.FindStatusCondition(mc.Status.Conditions, status.ConditionBootImageUpdateProgressing)
		if c == nil || c.Status+metav1.ConditionStatus(c.Message) == metav1.ConditionStatus(last) {
			continue
		}
		last = string(c.Status) + c.Message
		say("Progress: %s (Progressing=%s)", c.Message, c.Status)
		if c.Status == metav1.ConditionFalse {
			printSummary(ctx, env.Client)
		}
	}
}

// printSummary prints each MachineSet's and the CPMS's boot image.
func printSummary(ctx context.Context, c client.Client) {
	sets := &machinev1beta1.MachineSetList{}
	cps := &machinev1.ControlPlaneMachineSetList{}
	if c.List(ctx, sets, client.InNamespace(fixtures.MachineAPINamespace)) != nil || c.List(ctx, cps, client.InNamespace(fixtures.MachineAPINamespace)) != nil {
		return
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "    KIND\tNAME\tBOOT IMAGE")
	for _, ms := range sets.Items {
		fmt.Fprintf(tw, "    MachineSet\t%s\t%s\n", ms.Name, amiOf(ms.Spec.Template.Spec.ProviderSpec.Value))
	}
	for _, cp := range cps.Items {
		if t := cp.Spec.Template.OpenShiftMachineV1Beta1Machine; t != nil {
			fmt.Fprintf(tw, "    ControlPlaneMachineSet\t%s\t%s\n", cp.Name, amiOf(t.Spec.ProviderSpec.Value))
		}
	}
	_ = tw.Flush()
}

func amiOf(v *runtime.RawExtension) string {
	var ps struct {
		AMI struct {
			ID string `json:"id"`
		} `json:"ami"`
	}
	if v != nil {
		_ = json.Unmarshal(v.Raw, &ps)
	}
	return ps.AMI.ID
}

// out is where the demo speaks: the terminal, or a test's log.
var out io.Writer = os.Stdout

func say(format string, args ...any) {
	fmt.Fprintf(out, "==> "+format+"\n", args...)
}
