// Package bench measures the operator at scale on a real kube-apiserver and etcd: a wave of boot
// image updates over N MachineSets, against the floor of the same number of round trips sent one
// after another by an unthrottled client. Run with `make bench` (N from BENCH_MACHINESETS,
// default 1000; the idle window from BENCH_IDLE, default 60s). BenchmarkScaleCAPIAWS does the same
// for Cluster API MachineSets.
package bench_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/coreos/stream-metadata-go/stream"
	configv1 "github.com/openshift/api/config/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/featuregates"
	"github.com/bootimage-operator/bootimage-operator/internal/kube"
	"github.com/bootimage-operator/bootimage-operator/internal/status"
	"github.com/bootimage-operator/bootimage-operator/manifests"
	"github.com/bootimage-operator/bootimage-operator/test/fakecloud"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
	"github.com/bootimage-operator/bootimage-operator/test/testenv"
)

// ScaleResult is what one scale run reports.
type ScaleResult struct {
	Platform           string  `json:"platform"`
	MachineSets        int     `json:"machineSets"`
	ConvergenceSeconds float64 `json:"convergenceSeconds"`
	FloorSeconds       float64 `json:"floorSeconds"`
	Ratio              float64 `json:"ratio"`
	MachineSetWrites   int     `json:"machineSetWrites"`
	TemplateCreates    int     `json:"templateCreates,omitempty"`
	StatusWrites       int     `json:"statusWrites"`
	IdleSeconds        float64 `json:"idleSeconds"`
	IdleWrites         int     `json:"idleWrites"`
	PeakRSSMiB         float64 `json:"peakRSSMiB"`
	CPUSeconds         float64 `json:"cpuSeconds"`
	DescribeImages     int64   `json:"describeImages,omitempty"`
	// Nodes are the Nodes seeded beside the MachineSets (three of them control plane), with the
	// master, worker and infra pools.
	Nodes int `json:"nodes"`
	// CopyImages and IdleEC2Requests: the AMI copy run's CopyImage calls, and EC2 requests of
	// any kind while idle.
	CopyImages      int64 `json:"copyImages,omitempty"`
	IdleEC2Requests int64 `json:"idleEC2Requests"`
	// StartSeconds: start included. With no operator running the stream moves back, then a new
	// operator process starts: from its start until every MachineSet is back on the first
	// stream's image and MachineConfiguration/cluster says the pass is done (cache sync, every
	// decision and patch). StartRatio is StartSeconds over the same floor.
	StartSeconds float64 `json:"startSeconds,omitempty"`
	StartRatio   float64 `json:"startRatio,omitempty"`
}

func BenchmarkScaleGCP(b *testing.B) { benchmarkScale(b, configv1.GCPPlatformType) }
func BenchmarkScaleAWS(b *testing.B) { benchmarkScale(b, configv1.AWSPlatformType) }

// wave is how a platform's MachineSets start (up to date with the first stream) and what the
// second stream, which starts the wave, points them at.
type wave struct {
	providerSpec  string
	before, after *stream.Stream
	image         func(ps map[string]any) any
	want          any
}

func waveOf(platform configv1.PlatformType) wave {
	before, after := fixtures.Stream(), fixtures.Stream()
	switch platform {
	case configv1.AWSPlatformType:
		before.Architectures["x86_64"].Images.Aws.Regions["us-east-1"] = stream.SingleImage{Release: fixtures.StreamRelease, Image: fixtures.OldAWSAMI}
		return wave{
			providerSpec: fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI), before: before, after: after,
			image: func(ps map[string]any) any { return ps["ami"].(map[string]any)["id"] }, want: fixtures.NewAWSAMIUSEast1,
		}
	default:
		before.Architectures["x86_64"].Images.Gcp.Name = filepath.Base(fixtures.OldGCPImage)
		return wave{
			providerSpec: fixtures.GCPProviderSpec(fixtures.OldGCPImage), before: before, after: after,
			image: func(ps map[string]any) any { return ps["disks"].([]any)[0].(map[string]any)["image"] }, want: fixtures.NewGCPImage,
		}
	}
}

// envCount is envInt that takes 0 as a value.
func envCount(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v >= 0 {
		return v
	}
	return def
}

// seedNodesAndPools creates n Nodes, as a cluster of that size has them (three control plane
// Nodes, the rest workers, each with the labels a Node carries), and the master, worker and infra
// MachineConfigPools, 8 at a time.
func seedNodesAndPools(ctx context.Context, c client.Client, n int) error {
	for _, p := range []string{"master", "worker", "infra"} {
		if err := c.Create(ctx, fixtures.Pool(p, "")); err != nil {
			return err
		}
	}
	work := make(chan int)
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			var err error
			for i := range work {
				if err != nil {
					continue
				}
				role := "node-role.kubernetes.io/worker"
				if i < 3 {
					role = "node-role.kubernetes.io/control-plane"
				}
				node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%05d", i), Labels: map[string]string{
					role: "", corev1.LabelArchStable: "amd64", corev1.LabelOSStable: "linux", corev1.LabelHostname: fmt.Sprintf("node-%05d", i),
					corev1.LabelTopologyZone: "us-east-1a", corev1.LabelInstanceTypeStable: "m6i.xlarge",
				}}}
				err = c.Create(ctx, node)
			}
			errs <- err
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	var first error
	for range 8 {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func benchmarkScale(b *testing.B, platform configv1.PlatformType) {
	n := envInt("BENCH_MACHINESETS", 1000)
	nodes := envCount("BENCH_NODES_PER_MACHINESET", 3) * n
	idle := time.Duration(envInt("BENCH_IDLE", 60)) * time.Second
	benchmarkRun(b, fmt.Sprintf("scale-%s-%d.json", platform, n), func(ctx context.Context) (ScaleResult, error) {
		return runScale(ctx, b, platform, n, nodes, idle)
	})
}

// benchmarkRun runs run once per iteration, reports its result as metrics and saves it as
// bin/<file>.
func benchmarkRun(b *testing.B, file string, run func(context.Context) (ScaleResult, error)) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	for b.Loop() {
		res, err := run(ctx)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(res.ConvergenceSeconds, "convergence-s")
		b.ReportMetric(res.FloorSeconds, "floor-s")
		b.ReportMetric(res.Ratio, "ratio")
		if res.StartSeconds > 0 {
			b.ReportMetric(res.StartRatio, "start-ratio")
		}
		b.ReportMetric(float64(res.MachineSetWrites), "machineset-writes")
		if res.TemplateCreates > 0 {
			b.ReportMetric(float64(res.TemplateCreates), "template-creates")
		}
		b.ReportMetric(float64(res.StatusWrites), "status-writes")
		b.ReportMetric(float64(res.IdleWrites), "idle-writes")
		b.ReportMetric(res.PeakRSSMiB, "peak-rss-MiB")
		b.ReportMetric(res.CPUSeconds, "cpu-s")
		b.ReportMetric(float64(res.DescribeImages), "describe-images")
		b.ReportMetric(float64(res.IdleEC2Requests), "idle-ec2-requests")
		if res.CopyImages > 0 {
			b.ReportMetric(float64(res.CopyImages), "copy-images")
		}
		out, _ := json.Marshal(res)
		b.Logf("scale: %s", out)
		_ = os.WriteFile(filepath.Join(manifests.RepoRoot(), "bin", file), out, 0o644)
	}
}

func runScale(ctx context.Context, b *testing.B, platform configv1.PlatformType, n, nodes int, idle time.Duration) (ScaleResult, error) {
	res := ScaleResult{Platform: string(platform), MachineSets: n, Nodes: nodes, IdleSeconds: idle.Seconds()}
	env, c, err := startEnv(testenv.Options{})
	if err != nil {
		return res, err
	}
	defer func() { _ = env.Stop() }()

	w := waveOf(platform)
	dir := b.TempDir()
	operatorEnv := os.Environ()
	infra := fixtures.Infrastructure(platform)
	var ec2 *fakecloud.EC2
	if platform == configv1.AWSPlatformType {
		if ec2, err = fakeEC2(ctx, c, dir, infra, &operatorEnv); err != nil {
			return res, err
		}
		defer ec2.Close()
	}
	if err := fixtures.Create(ctx, c,
		infra,
		fixtures.FeatureGate(configv1.TechPreviewNoUpgrade, fixtures.ReleaseVersion, []configv1.FeatureGateName{featuregates.BootImageSkewEnforcement}, nil),
		fixtures.ClusterVersion(fixtures.ReleaseVersion, true),
		fixtures.MachineConfiguration(nil),
		fixtures.BootImagesConfigMap(w.before, fixtures.ReleaseVersion),
		fixtures.UserDataSecret("worker-user-data", fixtures.IgnitionStubV3),
	); err != nil {
		return res, err
	}
	for i := range n {
		if err := c.Create(ctx, fixtures.MachineSet(fmt.Sprintf("worker-%05d", i), w.providerSpec)); err != nil {
			return res, err
		}
	}
	if err := seedNodesAndPools(ctx, c, nodes); err != nil {
		return res, err
	}

	if res.FloorSeconds, err = floorSeconds(ctx, c, n); err != nil {
		return res, err
	}

	run, err := startMachineSetWave(ctx, env, c, dir, operatorEnv, n, ec2, w.after)
	if err != nil {
		return res, err
	}
	defer run.stop()
	if err := run.converge(ctx, run.sets, n, &res, func(ms *machinev1beta1.MachineSet) bool { return imageOf(ms, w.image) == w.want }); err != nil {
		return res, err
	}
	if err := run.finish(&res, idle, run.operator, run.sets); err != nil {
		return res, err
	}
	return res, coldStart(ctx, env, c, dir, operatorEnv, n, w, &res)
}

// coldStart moves the stream back to the first one while no operator runs, then starts a new
// operator process and measures until it has put every MachineSet back (ScaleResult.StartSeconds).
func coldStart(ctx context.Context, env *testenv.Env, c client.WithWatch, dir string, environ []string, n int, w wave, res *ScaleResult) error {
	sets, err := resumingWatch(ctx, c, &machinev1beta1.MachineSetList{}, client.InNamespace(kube.MachineAPINamespace))
	if err != nil {
		return err
	}
	defer sets.Stop()
	var before map[string]any
	if err := json.Unmarshal([]byte(w.providerSpec), &before); err != nil {
		return err
	}
	wave, err := startMeasuredWave(ctx, c, nil, w.before)
	if err != nil {
		return err
	}
	defer wave.mcs.Stop()
	operator, err := launchOperator(ctx, env, dir, environ)
	if err != nil {
		return err
	}
	defer func() { _ = operator.Process.Kill(); _ = operator.Wait() }()
	wave.start = time.Now()
	var cold ScaleResult
	if err := wave.converge(ctx, sets, n, &cold, func(ms *machinev1beta1.MachineSet) bool { return imageOf(ms, w.image) == w.image(before) }); err != nil {
		return fmt.Errorf("cold start: %w", err)
	}
	res.StartSeconds = time.Since(wave.start).Seconds()
	res.StartRatio = res.StartSeconds / res.FloorSeconds
	return nil
}

// machineSetWave is a measured wave over n Machine API MachineSets, with the operator running.
type machineSetWave struct {
	*measuredWave
	operator *exec.Cmd
	// sets resumes where it stopped: the API server drops a watcher that falls behind a wave of
	// thousands of writes, and every write must be counted.
	sets watch.Interface
}

// startMachineSetWave starts the operator (its first pass over n MachineSets outside the
// measurement), watches the MachineSets, then starts the wave: the stream after, as an upgrade
// writes it.
func startMachineSetWave(ctx context.Context, env *testenv.Env, c client.WithWatch, dir string, environ []string, n int, ec2 *fakecloud.EC2, after *stream.Stream) (*machineSetWave, error) {
	operator, err := startOperator(ctx, env, c, dir, environ, progressingFalse(n, 0))
	if err != nil {
		return nil, err
	}
	run := &machineSetWave{operator: operator}
	if run.sets, err = resumingWatch(ctx, c, &machinev1beta1.MachineSetList{}, client.InNamespace(kube.MachineAPINamespace)); err != nil {
		run.stop()
		return nil, err
	}
	if run.measuredWave, err = startMeasuredWave(ctx, c, ec2, after); err != nil {
		run.stop()
		return nil, err
	}
	return run, nil
}

// stop stops the watches and kills the operator, if finish has not stopped it.
func (r *machineSetWave) stop() {
	if r.sets != nil {
		r.sets.Stop()
	}
	if r.measuredWave != nil {
		r.mcs.Stop()
	}
	_ = r.operator.Process.Kill()
}

// measuredWave is a wave of new boot images under measurement.
type measuredWave struct {
	// mcs watches MachineConfigurations from before the wave.
	mcs            watch.Interface
	start          time.Time
	ec2            *fakecloud.EC2
	describeBefore int64
}

// floorSeconds sends the floor: the same number of get + JSON patch round trips as a wave of n
// MachineSets needs, one after another, unthrottled.
func floorSeconds(ctx context.Context, c client.Client, n int) (float64, error) {
	start := time.Now()
	for i := range n {
		ms := &machinev1beta1.MachineSet{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: kube.MachineAPINamespace, Name: fmt.Sprintf("worker-%05d", i)}, ms); err != nil {
			return 0, err
		}
		patch := fmt.Sprintf(`[{"op":"test","path":"/metadata/resourceVersion","value":%q},{"op":"add","path":"/metadata/labels/bench-floor","value":"done"}]`, ms.ResourceVersion)
		if err := c.Patch(ctx, ms, client.RawPatch(types.JSONPatchType, []byte(patch))); err != nil {
			return 0, err
		}
	}
	return time.Since(start).Seconds(), nil
}

// converge counts the writes of the wave until every one of n MachineSets is updated (as updated
// says) and MachineConfiguration/cluster says the pass is finished.
func (wave *measuredWave) converge(ctx context.Context, sets watch.Interface, n int, res *ScaleResult, updated func(*machinev1beta1.MachineSet) bool) error {
	done := map[string]bool{}
	var latest *operatorv1.MachineConfiguration
	for latest == nil || len(done) < n || !progressingFalse(n, 0)(latest) {
		select {
		case ev, ok := <-sets.ResultChan():
			if !ok {
				return fmt.Errorf("the MachineSet watch ended")
			}
			if ms, isMS := ev.Object.(*machinev1beta1.MachineSet); isMS && ev.Type == watch.Modified {
				res.MachineSetWrites++
				if updated(ms) {
					done[ms.Name] = true
				}
			}
		case ev, ok := <-wave.mcs.ResultChan():
			if !ok {
				return fmt.Errorf("the MachineConfiguration watch ended")
			}
			if mc, isMC := ev.Object.(*operatorv1.MachineConfiguration); isMC && ev.Type == watch.Modified {
				res.StatusWrites++
				latest = mc
			}
		case <-ctx.Done():
			return fmt.Errorf("wave: %d of %d MachineSets updated: %w", len(done), n, ctx.Err())
		}
	}
	return nil
}

// startMeasuredWave starts watching MachineConfigurations, then the wave (see startWave).
func startMeasuredWave(ctx context.Context, c client.WithWatch, ec2 *fakecloud.EC2, after *stream.Stream) (*measuredWave, error) {
	mcs, err := resumingWatch(ctx, c, &operatorv1.MachineConfigurationList{})
	if err != nil {
		return nil, err
	}
	wave := &measuredWave{mcs: mcs, ec2: ec2, describeBefore: describeImages(ec2)}
	if wave.start, err = startWave(ctx, c, after); err != nil {
		mcs.Stop()
		return nil, err
	}
	return wave, nil
}

// finish records in res the wave's convergence and DescribeImages calls, then the writes the
// watches and the wave's see while idle, and stops the operator.
func (wave *measuredWave) finish(res *ScaleResult, idle time.Duration, operator *exec.Cmd, watches ...watch.Interface) error {
	res.ConvergenceSeconds = time.Since(wave.start).Seconds()
	res.Ratio = res.ConvergenceSeconds / res.FloorSeconds
	res.DescribeImages = describeImages(wave.ec2) - wave.describeBefore

	// Idle: nothing changes, so nothing may be written, nor asked of EC2.
	before := ec2Requests(wave.ec2)
	res.IdleWrites = writesWithin(idle, append(watches, wave.mcs)...)
	res.IdleEC2Requests = ec2Requests(wave.ec2) - before

	return stopOperator(operator, res)
}

// startEnv starts a kube-apiserver and etcd, with a client that sends as fast as it can.
func startEnv(opts testenv.Options) (*testenv.Env, client.WithWatch, error) {
	env, err := testenv.Start(opts)
	if err != nil {
		return nil, nil, err
	}
	unthrottled := rest.CopyConfig(env.Config)
	unthrottled.QPS, unthrottled.Burst = -1, 0
	c, err := client.NewWithWatch(unthrottled, client.Options{Scheme: env.Scheme})
	if err != nil {
		_ = env.Stop()
		return nil, nil, err
	}
	return env, c, nil
}

// startWave writes the stream after to coreos-bootimages, as an upgrade does, and returns when.
func startWave(ctx context.Context, c client.Client, after *stream.Stream) (time.Time, error) {
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: kube.MCONamespace, Name: kube.BootImagesConfigMapName}, cm); err != nil {
		return time.Time{}, err
	}
	cm.Data = fixtures.BootImagesConfigMap(after, fixtures.ReleaseVersion).Data
	start := time.Now()
	return start, c.Update(ctx, cm)
}

// stopOperator stops the operator and records its peak RSS and CPU time in res.
func stopOperator(operator *exec.Cmd, res *ScaleResult) error {
	if err := operator.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	_ = operator.Wait()
	if usage, ok := operator.ProcessState.SysUsage().(*syscall.Rusage); ok {
		res.PeakRSSMiB = float64(usage.Maxrss) / 1024
		res.CPUSeconds = time.Duration(usage.Utime.Nano() + usage.Stime.Nano()).Seconds()
	}
	return nil
}

// fakeEC2 serves EC2 to the operator: its endpoint in infra, its CA in environ, and the
// credentials Secret.
func fakeEC2(ctx context.Context, c client.Client, dir string, infra *configv1.Infrastructure, environ *[]string) (*fakecloud.EC2, error) {
	ec2 := fakecloud.NewEC2(fixtures.AWSImages())
	caBundle := filepath.Join(dir, "ec2-ca.pem")
	if err := os.WriteFile(caBundle, ec2.CertificatePEM(), 0o600); err != nil {
		ec2.Close()
		return nil, err
	}
	*environ = append(*environ, "SSL_CERT_FILE="+caBundle)
	infra.Status.PlatformStatus.AWS.ServiceEndpoints = []configv1.AWSServiceEndpoint{{Name: "ec2", URL: ec2.URL}}
	if err := fixtures.Create(ctx, c, fixtures.AWSCredentialsSecret()); err != nil {
		ec2.Close()
		return nil, err
	}
	return ec2, nil
}

// resumingWatch watches list from its current resourceVersion, resuming after a dropped watch.
func resumingWatch(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) (watch.Interface, error) {
	if err := c.List(ctx, list, opts...); err != nil {
		return nil, err
	}
	lw := &cache.ListWatch{WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		return c.Watch(ctx, list.DeepCopyObject().(client.ObjectList), append(opts, &client.ListOptions{Raw: &o})...)
	}}
	return watchtools.NewRetryWatcherWithContext(ctx, list.GetResourceVersion(), lw)
}

// ec2Requests counts the EC2 requests of every kind, failed ones included.
func ec2Requests(ec2 *fakecloud.EC2) int64 {
	if ec2 == nil {
		return 0
	}
	return int64(ec2.AllCalls())
}

func describeImages(ec2 *fakecloud.EC2) int64 {
	if ec2 == nil {
		return 0
	}
	return ec2.Calls.Load()
}

func imageOf(ms *machinev1beta1.MachineSet, image func(map[string]any) any) any {
	var ps map[string]any
	if ms.Spec.Template.Spec.ProviderSpec.Value == nil || json.Unmarshal(ms.Spec.Template.Spec.ProviderSpec.Value.Raw, &ps) != nil {
		return nil
	}
	return image(ps)
}

// progressingFalse reports whether mc says a finished pass over n Machine API MachineSets and
// capi Cluster API MachineSets.
func progressingFalse(n, capi int) func(*operatorv1.MachineConfiguration) bool {
	want := fmt.Sprintf("Reconciled %d of %d MAPI MachineSets (0 skipped) | Reconciled 0 of 0 ControlPlaneMachineSets (0 skipped)", n, n)
	if capi > 0 {
		want += fmt.Sprintf(" | Reconciled %d of %d CAPI MachineSets and MachineDeployments (0 skipped)", capi, capi)
	}
	return func(mc *operatorv1.MachineConfiguration) bool {
		c := meta.FindStatusCondition(mc.Status.Conditions, status.ConditionBootImageUpdateProgressing)
		return c != nil && c.Status == metav1.ConditionFalse && c.Message == want
	}
}

// waitFor polls MachineConfiguration/cluster until ok.
func waitFor(ctx context.Context, c client.Client, ok func(*operatorv1.MachineConfiguration) bool) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		mc := &operatorv1.MachineConfiguration{}
		if err := c.Get(ctx, client.ObjectKey{Name: kube.MachineConfigurationName}, mc); err == nil && ok(mc) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// startOperator builds the operator, runs it against env as its own process, so its memory and
// CPU are its own, and returns once MachineConfiguration/cluster says firstPass: the first pass is
// outside the measurement.
func startOperator(ctx context.Context, env *testenv.Env, c client.Client, dir string, environ []string, firstPass func(*operatorv1.MachineConfiguration) bool) (*exec.Cmd, error) {
	cmd, err := launchOperator(ctx, env, dir, environ)
	if err != nil {
		return nil, err
	}
	if err := waitFor(ctx, c, firstPass); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("waiting for the operator's first pass: %w", err)
	}
	return cmd, nil
}

// launchOperator builds the operator into dir (once) and starts it against env.
func launchOperator(ctx context.Context, env *testenv.Env, dir string, environ []string) (*exec.Cmd, error) {
	bin := filepath.Join(dir, "bootimage-operator")
	if _, err := os.Stat(bin); err != nil {
		build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/bootimage-operator")
		build.Dir = manifests.RepoRoot()
		if out, err := build.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("building the operator: %v: %s", err, out)
		}
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := env.WriteKubeconfig(kubeconfig); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--kubeconfig", kubeconfig, "--release-version", fixtures.ReleaseVersion,
		"--leader-elect=false", "--metrics-bind-address", "0", "--health-probe-bind-address", "0")
	cmd.Env = environ
	logs, err := os.Create(filepath.Join(manifests.RepoRoot(), "bin", "scale-operator.log"))
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return cmd, nil
}
