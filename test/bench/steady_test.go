package bench_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coreos/stream-metadata-go/stream"
	"github.com/go-logr/logr"
	operatorv1 "github.com/openshift/api/operator/v1"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/bootimage"
	"github.com/bootimage-operator/bootimage-operator/bootimage/aws"
	"github.com/bootimage-operator/bootimage-operator/bootimage/cloud/awscloud"
	"github.com/bootimage-operator/bootimage-operator/bootimage/clusterapi"
	"github.com/bootimage-operator/bootimage-operator/controllers"
	"github.com/bootimage-operator/bootimage-operator/internal/seams"
	"github.com/bootimage-operator/bootimage-operator/manifests"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
	"github.com/bootimage-operator/bootimage-operator/test/testenv"
)

// SteadyResult is what one steady-state run reports.
type SteadyResult struct {
	Platform    string `json:"platform"`
	MachineSets int    `json:"machineSets"`
	// GraceSeconds is the template copies' grace (seams.TemplateGCGrace) during the run.
	GraceSeconds float64 `json:"graceSeconds"`
	IdleSeconds  float64 `json:"idleSeconds"`
	// Requests are the API server's non-watch requests (apiserver_request_total) during the idle
	// window, less those it counted in a window as long with the operator stopped (its own
	// loopback clients); RequestsPerMinute is that per idle minute.
	Requests          float64 `json:"requests"`
	RequestsPerMinute float64 `json:"requestsPerIdleMinute"`
	// WindowSeconds is the time between the two scrapes of the window, which the per-minute rate
	// divides by (a little longer than IdleSeconds).
	WindowSeconds float64 `json:"windowSeconds"`
	// Reconciles are the Cluster API MachineSet controller's reconciles during the window; at the
	// shortened grace they are bounded by how fast the operator gets through them, not by N/grace.
	// AtDefaultGracePerMinute is Requests per reconcile times one reconcile per owner per
	// clusterapi.TemplateGCGrace: what the window would count per minute at the default grace.
	Reconciles              float64 `json:"reconciles"`
	RequestsPerReconcile    float64 `json:"requestsPerReconcile"`
	AtDefaultGracePerMinute float64 `json:"atDefaultGracePerMinute"`
	// ByRequest breaks Requests down by "VERB group/resource[/subresource]".
	ByRequest map[string]float64 `json:"byRequest"`
	// Window and Baseline are the raw server-side counts, by the same keys, with and without the
	// controllers.
	Window   map[string]float64 `json:"window"`
	Baseline map[string]float64 `json:"baseline"`
	// ClientRequests are the non-watch requests the operator's own REST client sent during the
	// window, by "METHOD path" with object names folded: a cross-check of Requests.
	ClientRequests map[string]int `json:"clientRequests"`
	// SetupSeconds is how long seeding, the first pass and the two changes took;
	// FirstChangeSeconds and SecondChangeSeconds how long each change took until every
	// MachineSet named its copy (and, for the second, the status said the pass was done).
	SetupSeconds        float64 `json:"setupSeconds"`
	FirstChangeSeconds  float64 `json:"firstChangeSeconds"`
	SecondChangeSeconds float64 `json:"secondChangeSeconds"`
}

// BenchmarkSteadyCAPIAWS is the steady state after two boot image changes over N Cluster API
// MachineSets on AWS (N from BENCH_CAPI_MACHINESETS, default 500), each on its own
// AWSMachineTemplate and with one Machine and one AWSMachine still cloned from the first change's
// copy, so that every owner keeps a copy in use: the API requests the operator makes per idle
// minute (BENCH_IDLE seconds, default 60), watches aside. The operator runs in this process
// (testenv's manager path) so that the copies' grace can be shortened to BENCH_GC_GRACE seconds
// (default 15, seams.TemplateGCGrace) and several garbage collection passes fall in the window.
func BenchmarkSteadyCAPIAWS(b *testing.B) {
	n := envInt("BENCH_CAPI_MACHINESETS", 500)
	idle := time.Duration(envInt("BENCH_IDLE", 60)) * time.Second
	grace := time.Duration(envInt("BENCH_GC_GRACE", 15)) * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	for b.Loop() {
		res, err := runSteady(ctx, b, n, idle, grace)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(res.RequestsPerMinute, "requests/idle-min")
		b.ReportMetric(res.Requests, "idle-requests")
		b.ReportMetric(res.Reconciles, "idle-reconciles")
		b.ReportMetric(res.AtDefaultGracePerMinute, "requests/idle-min-at-default-grace")
		b.ReportMetric(res.SetupSeconds, "setup-s")
		out, _ := json.Marshal(res)
		b.Logf("steady: %s", out)
		_ = os.WriteFile(filepath.Join(manifests.RepoRoot(), "bin", fmt.Sprintf("steady-capi-AWS-%d.json", n)), out, 0o644)
	}
}

// The boot image of the middle stream: between fixtures.OldAWSAMI and fixtures.NewAWSAMIUSEast1.
const (
	midAWSAMI      = "ami-0bbbbbbbbbbbbbb02"
	midAWSRelease  = "9.6.20250301-0"
	midAWSAMIImage = "rhcos-" + midAWSRelease + "-x86_64"
)

func runSteady(ctx context.Context, b *testing.B, n int, idle, grace time.Duration) (SteadyResult, error) {
	res := SteadyResult{Platform: "AWS Cluster API", MachineSets: n, GraceSeconds: grace.Seconds(), IdleSeconds: idle.Seconds()}
	setup := time.Now()
	phase := func(what string) { b.Logf("%6.1fs %s", time.Since(setup).Seconds(), what) }
	logs, err := os.Create(filepath.Join(manifests.RepoRoot(), "bin", "steady-operator.log"))
	if err != nil {
		return res, err
	}
	defer logs.Close()
	ctrl.SetLogger(logr.FromSlogHandler(slog.NewTextHandler(logs, nil)))
	env, c, err := startEnv(testenv.Options{CAPI: true})
	if err != nil {
		return res, err
	}
	defer func() { _ = env.Stop() }()
	phase("control plane up")

	before, mid, after := fixtures.Stream(), fixtures.Stream(), fixtures.Stream()
	before.Architectures["x86_64"].Images.Aws.Regions["us-east-1"] = stream.SingleImage{Release: fixtures.StreamRelease, Image: fixtures.OldAWSAMI}
	mid.Architectures["x86_64"].Images.Aws.Regions["us-east-1"] = stream.SingleImage{Release: midAWSRelease, Image: midAWSAMI}
	images := append(fixtures.AWSImages(), aws.Image{ImageID: midAWSAMI, OwnerID: aws.RHCOSOwner, Name: midAWSAMIImage,
		Description: midAWSAMIImage, CreationDate: "2025-03-01T00:00:00.000Z", Region: "us-east-1", State: "available"})
	if err := fixtures.Create(ctx, c, append(fixtures.ClusterAPIOnAWS(fixtures.ClusterAPIManager(operatorv1.MachineSets, operatorv1.All)),
		fixtures.BootImagesConfigMap(before, fixtures.ReleaseVersion))...); err != nil {
		return res, err
	}
	name := func(i int) string { return fmt.Sprintf("worker-%05d", i) }
	for i := range n {
		if err := c.Create(ctx, fixtures.AWSMachineTemplate(name(i)+"-0a1b2c3d", fixtures.OldAWSAMI)); err != nil {
			return res, err
		}
		if err := c.Create(ctx, fixtures.ClusterAPIOwner("MachineSet", name(i), name(i)+"-0a1b2c3d")); err != nil {
			return res, err
		}
	}

	// The operator, in this process on the manager path the integration tests use, so that the
	// seams apply; with the command's client limits, and a count of what its client sends.
	phase("seeded")
	sent := &requestCount{}
	opEnv := *env
	opEnv.Config = rest.CopyConfig(env.Config)
	opEnv.Config.QPS, opEnv.Config.Burst = 200, 400
	opEnv.Config.Wrap(func(rt http.RoundTripper) http.RoundTripper { return sent.wrap(rt) })
	mgr, err := opEnv.StartOperatorWithHooks(seams.Hooks{TemplateGCGrace: grace},
		controllers.Options{ReleaseVersion: fixtures.ReleaseVersion, Images: (&awscloud.Static{AMIs: images}).Clouds()})
	if err != nil {
		return res, err
	}
	defer func() { _ = mgr.Stop() }()
	if err := waitFor(ctx, c, progressingFalse(0, n)); err != nil {
		return res, fmt.Errorf("waiting for the operator's first pass: %w", err)
	}
	phase("first pass done")

	// First change: every MachineSet onto a copy with the middle AMI.
	firstStart, err := startWave(ctx, c, mid)
	if err != nil {
		return res, err
	}
	first, err := waitForTemplates(ctx, c, n, midAWSAMI)
	if err != nil {
		return res, fmt.Errorf("first change: %w", err)
	}
	res.FirstChangeSeconds = time.Since(firstStart).Seconds()
	phase("first change done")
	// What Cluster API would make of the first copy: one Machine and one AWSMachine per
	// MachineSet, cloned from it. No Cluster API controller runs, so nothing else changes them.
	for i := range n {
		machine, awsMachine := capiMachines(name(i), first[name(i)])
		if err := c.Create(ctx, awsMachine); err != nil {
			return res, err
		}
		if err := c.Create(ctx, machine); err != nil {
			return res, err
		}
	}
	phase("Machines and AWSMachines created")
	// Second change: every MachineSet onto a copy with the stream's AMI; the first copy stays in
	// use by its Machine and AWSMachine.
	secondStart, err := startWave(ctx, c, after)
	if err != nil {
		return res, err
	}
	second, err := waitForTemplates(ctx, c, n, fixtures.NewAWSAMIUSEast1)
	if err != nil {
		return res, fmt.Errorf("second change: %w", err)
	}
	if err := waitFor(ctx, c, progressingFalse(0, n)); err != nil {
		return res, fmt.Errorf("waiting for the pass after the second change: %w", err)
	}
	res.SecondChangeSeconds = time.Since(secondStart).Seconds()
	phase("second change done")
	for i := range n {
		if first[name(i)] == second[name(i)] {
			return res, fmt.Errorf("MachineSet %s: the second change kept copy %s", name(i), first[name(i)])
		}
	}
	// Settle: the collector's first sweep after the copies are a grace period old, which finds
	// each first copy old enough and still in use, falls before the window (no owner comes back on
	// a timer of its own: the sweep of the namespace is the one periodic reconcile).
	if err := settled(ctx, time.Now().Add(grace)); err != nil {
		return res, fmt.Errorf("settling: %w", err)
	}
	res.SetupSeconds = time.Since(setup).Seconds()
	phase("settled; idle window starts")

	// The window: this process sends nothing (no watch of its own is open) while the operator idles.
	reconcilesBefore, err := testenv.Reconciles(capiMachineSetController)
	if err != nil {
		return res, err
	}
	window, windowTime, err := idleRequests(ctx, env.Config, idle, sent)
	if err != nil {
		return res, err
	}
	reconcilesAfter, err := testenv.Reconciles(capiMachineSetController)
	if err != nil {
		return res, err
	}
	res.Reconciles = reconcilesAfter - reconcilesBefore
	res.WindowSeconds = windowTime.Seconds()
	res.ClientRequests = sent.last
	if err := checkCopiesKept(ctx, c, first, second); err != nil {
		return res, err
	}
	if err := mgr.Stop(); err != nil {
		return res, fmt.Errorf("stopping the operator: %w", err)
	}
	phase("idle window done, operator stopped")
	// The baseline: as long a window with the operator stopped (Stop returns once its runnables,
	// and so their requests, have ended), for the API server's own requests.
	baseline, _, err := idleRequests(ctx, env.Config, idle, nil)
	if err != nil {
		return res, err
	}
	res.Window, res.Baseline = window, baseline
	res.ByRequest = map[string]float64{}
	for _, counts := range []map[string]float64{window, baseline} {
		for k := range counts {
			if d := window[k] - baseline[k]; d != 0 {
				res.ByRequest[k] = d
			}
		}
	}
	for _, v := range res.ByRequest {
		res.Requests += v
	}
	res.RequestsPerMinute = res.Requests / windowTime.Minutes()
	if res.Reconciles > 0 {
		res.RequestsPerReconcile = res.Requests / res.Reconciles
		res.AtDefaultGracePerMinute = res.RequestsPerReconcile * float64(n) / clusterapi.TemplateGCGrace.Minutes()
	}
	return res, nil
}

// capiMachines returns the Machine and AWSMachine of MachineSet owner cloned from template.
func capiMachines(owner, template string) (machine, awsMachine *unstructured.Unstructured) {
	name := owner + "-x7k2p"
	awsMachine = fixtures.ClusterAPIObject(fmt.Sprintf(`
apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: AWSMachine
metadata:
  name: %s
  labels: {pool: %s, cluster.x-k8s.io/cluster-name: demo, cluster.x-k8s.io/set-name: %s}
  annotations: {%s: %s, cluster.x-k8s.io/cloned-from-groupkind: AWSMachineTemplate.infrastructure.cluster.x-k8s.io}
spec:
  instanceType: m6i.xlarge
  ami: {id: %s}`, name, owner, owner, clusterapi.ClonedFromNameAnnotation, template, midAWSAMI))
	machine = fixtures.ClusterAPIObject(fmt.Sprintf(`
apiVersion: cluster.x-k8s.io/v1beta2
kind: Machine
metadata:
  name: %s
  labels: {pool: %s, cluster.x-k8s.io/cluster-name: demo, cluster.x-k8s.io/set-name: %s}
  annotations: {%s: %s}
spec:
  clusterName: demo
  bootstrap: {dataSecretName: worker-user-data}
  infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: AWSMachine, name: %s}`, name, owner, owner, clusterapi.ClonedFromNameAnnotation, template, name))
	return machine, awsMachine
}

// waitForTemplates polls until each of the n Cluster API MachineSets names a template with ami,
// and returns those templates by MachineSet.
func waitForTemplates(ctx context.Context, c client.Client, n int, ami string) (map[string]string, error) {
	inCAPI := client.InNamespace(bootimage.ClusterAPINamespace)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	got := map[string]string{}
	for {
		owners, templates := unstructuredList(capiAPIVersion, "MachineSet"), unstructuredList(templateAPIVersion, "AWSMachineTemplate")
		if err := c.List(ctx, owners, inCAPI); err != nil {
			return nil, err
		}
		if err := c.List(ctx, templates, inCAPI); err != nil {
			return nil, err
		}
		amiOf := map[string]string{}
		for _, t := range templates.Items {
			amiOf[t.GetName()], _, _ = unstructured.NestedString(t.Object, "spec", "template", "spec", "ami", "id")
		}
		clear(got)
		for _, o := range owners.Items {
			if t, _, _ := unstructured.NestedString(o.Object, "spec", "template", "spec", "infrastructureRef", "name"); amiOf[t] == ami {
				got[o.GetName()] = t
			}
		}
		if len(got) == n {
			return got, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%d of %d Cluster API MachineSets on a template with %s: %w", len(got), n, ami, ctx.Err())
		case <-tick.C:
		}
	}
}

// checkCopiesKept fails unless both copies of every MachineSet still exist: the first is in use
// by its Machine and AWSMachine, the second by the MachineSet.
func checkCopiesKept(ctx context.Context, c client.Client, copies ...map[string]string) error {
	templates := unstructuredList(templateAPIVersion, "AWSMachineTemplate")
	if err := c.List(ctx, templates, client.InNamespace(bootimage.ClusterAPINamespace)); err != nil {
		return err
	}
	have := map[string]bool{}
	for _, t := range templates.Items {
		have[t.GetName()] = t.GetDeletionTimestamp() == nil
	}
	for _, m := range copies {
		for owner, t := range m {
			if !have[t] {
				return fmt.Errorf("MachineSet %s: copy %s, in use, is gone", owner, t)
			}
		}
	}
	return nil
}

// idleRequests sleeps d and returns the non-watch requests the API server counted meanwhile
// (apiserver_request_total), by "VERB group/resource[/subresource]", and the time between the
// two scrapes' answers. When sent is not nil, it also records in sent.last what the operator's
// client sent meanwhile. It sends only the two scrapes, one before and one after d.
func idleRequests(ctx context.Context, cfg *rest.Config, d time.Duration, sent *requestCount) (map[string]float64, time.Duration, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, 0, err
	}
	start, err := apiserverRequests(ctx, hc, cfg.Host)
	if err != nil {
		return nil, 0, err
	}
	began := time.Now()
	sent.reset()
	select {
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	case <-time.After(d):
	}
	end, err := apiserverRequests(ctx, hc, cfg.Host)
	if err != nil {
		return nil, 0, err
	}
	elapsed := time.Since(began)
	sent.snapshot()
	out := map[string]float64{}
	for k, v := range end {
		if delta := v - start[k]; delta != 0 {
			out[k] += delta
		}
	}
	return out, elapsed, nil
}

// capiMachineSetController is the name of the operator's Cluster API MachineSet controller.
const capiMachineSetController = "clusterapi-machineset"

// apiserverRequests scrapes the API server's apiserver_request_total, summed by verb, group,
// resource and subresource, WATCH verbs left out.
func apiserverRequests(ctx context.Context, hc *http.Client, host string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(host, "/")+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, m := range families["apiserver_request_total"].GetMetric() {
		l := testenv.Labels(m)
		if strings.HasPrefix(l["verb"], "WATCH") {
			continue
		}
		resource := l["resource"]
		if l["group"] != "" {
			resource = l["group"] + "/" + resource
		}
		if l["subresource"] != "" {
			resource += "/" + l["subresource"]
		}
		if resource == "" {
			resource = "(non-resource)"
		}
		out[l["verb"]+" "+resource] += m.GetCounter().GetValue()
	}
	return out, nil
}

// requestCount counts the non-watch requests a REST client sends, by method and path.
type requestCount struct {
	mu   sync.Mutex
	by   map[string]int
	last map[string]int
}

func (r *requestCount) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if req.URL.Query().Get("watch") != "true" && req.URL.Query().Get("watch") != "1" {
			key := req.Method + " " + foldNames(req.URL.Path)
			r.mu.Lock()
			if r.by == nil {
				r.by = map[string]int{}
			}
			r.by[key]++
			r.mu.Unlock()
		}
		return rt.RoundTrip(req)
	})
}

func (r *requestCount) reset() {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.by = map[string]int{}
}

func (r *requestCount) snapshot() {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last = maps.Clone(r.by)
}

// foldNames replaces the object name in an API path by {name}, so that requests group by kind.
func foldNames(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	// /api/v1/... or /apis/group/version/...: after it, [namespaces/ns/]resource[/name[/sub]].
	i := 2
	if len(parts) > 0 && parts[0] == "apis" {
		i = 3
	}
	if len(parts) > i+1 && parts[i] == "namespaces" {
		if len(parts) == i+2 {
			parts[i+1] = "{name}"
			return "/" + strings.Join(parts, "/")
		}
		i += 2
	}
	if len(parts) > i+1 {
		parts[i+1] = "{name}"
	}
	return "/" + strings.Join(parts, "/")
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// settled waits until oldAt has passed and the Cluster API MachineSet controller has then
// reconciled once more: the collector's sweep.
func settled(ctx context.Context, oldAt time.Time) error {
	const sweeps = 1
	base := -1.0
	return wait.PollUntilContextTimeout(ctx, time.Second, 10*time.Minute, true, func(context.Context) (bool, error) {
		if time.Now().Before(oldAt) {
			return false, nil
		}
		n, err := testenv.Reconciles(capiMachineSetController)
		if err != nil {
			return false, err
		}
		if base < 0 {
			base = n
		}
		return n >= base+sweeps, nil
	})
}
