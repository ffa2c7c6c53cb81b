package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-dev/tailgate/gateway"
	"gopkg.in/yaml.v3"
)

// This file: the deployment examples (the Dockerfile and the Kubernetes
// manifests in deploy/kubernetes) checked against the real serve command,
// as far as a machine without a container engine or a cluster allows.

const (
	repoRoot    = "../.."
	manifestDir = repoRoot + "/deploy/kubernetes"
)

// object is the part of a Kubernetes object every kind has; spec and data
// are decoded per kind.
type object struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name      string            `yaml:"name"`
		Namespace string            `yaml:"namespace"`
		Labels    map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	Spec yaml.Node         `yaml:"spec"`
	Data map[string]string `yaml:"data"`
	file string
}

type selector struct {
	MatchLabels map[string]string `yaml:"matchLabels"`
}

type probe struct {
	HTTPGet *struct {
		Path string `yaml:"path"`
		Port string `yaml:"port"` // a number or a port's name
	} `yaml:"httpGet"`
	PeriodSeconds    int `yaml:"periodSeconds"`
	FailureThreshold int `yaml:"failureThreshold"`
}

type container struct {
	Name    string   `yaml:"name"`
	Image   string   `yaml:"image"`
	Command []string `yaml:"command"`
	Args    []string `yaml:"args"`
	Ports   []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	ReadinessProbe *probe `yaml:"readinessProbe"`
	LivenessProbe  *probe `yaml:"livenessProbe"`
	Resources      struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	SecurityContext struct {
		AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
		ReadOnlyRootFilesystem   *bool `yaml:"readOnlyRootFilesystem"`
		Capabilities             struct {
			Drop []string `yaml:"drop"`
		} `yaml:"capabilities"`
	} `yaml:"securityContext"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
	Env []struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom *struct {
			ResourceFieldRef *struct {
				ContainerName string `yaml:"containerName"`
				Resource      string `yaml:"resource"`
				Divisor       string `yaml:"divisor"`
			} `yaml:"resourceFieldRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
}

type deploymentSpec struct {
	Replicas int      `yaml:"replicas"`
	Selector selector `yaml:"selector"`
	Template struct {
		Metadata struct {
			Labels map[string]string `yaml:"labels"`
		} `yaml:"metadata"`
		Spec struct {
			TerminationGracePeriodSeconds *int `yaml:"terminationGracePeriodSeconds"`
			SecurityContext               struct {
				RunAsNonRoot *bool `yaml:"runAsNonRoot"`
				RunAsUser    *int  `yaml:"runAsUser"`
			} `yaml:"securityContext"`
			Containers []container `yaml:"containers"`
			Volumes    []struct {
				Name      string `yaml:"name"`
				ConfigMap *struct {
					Name string `yaml:"name"`
				} `yaml:"configMap"`
			} `yaml:"volumes"`
		} `yaml:"spec"`
	} `yaml:"template"`
}

type servicePort struct {
	Name       string `yaml:"name"`
	Port       int    `yaml:"port"`
	TargetPort string `yaml:"targetPort"`
}

type serviceSpec struct {
	ClusterIP string            `yaml:"clusterIP"`
	Selector  map[string]string `yaml:"selector"`
	Ports     []servicePort     `yaml:"ports"`
}

type pdbSpec struct {
	MinAvailable   *int     `yaml:"minAvailable"`
	MaxUnavailable *int     `yaml:"maxUnavailable"`
	Selector       selector `yaml:"selector"`
}

type serviceMonitorSpec struct {
	NamespaceSelector struct {
		MatchNames []string `yaml:"matchNames"`
	} `yaml:"namespaceSelector"`
	Selector  selector `yaml:"selector"`
	Endpoints []struct {
		Port string `yaml:"port"`
		Path string `yaml:"path"`
	} `yaml:"endpoints"`
}

// loadManifests parses every document of every manifest but the
// kustomization, and returns them with the kustomization's resources.
func loadManifests(t *testing.T) ([]object, []string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(manifestDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s: %v", manifestDir, err)
	}
	var objs []object
	var resources []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(strings.NewReader(string(data)))
		for i := 0; ; i++ {
			var o object
			err := dec.Decode(&o)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s, document %d: %v", filepath.Base(f), i+1, err)
			}
			if o.Kind == "" || o.APIVersion == "" {
				t.Fatalf("%s, document %d: no kind or apiVersion", filepath.Base(f), i+1)
			}
			if o.Kind == "Kustomization" {
				var k struct {
					Resources []string `yaml:"resources"`
				}
				if err := yaml.Unmarshal(data, &k); err != nil {
					t.Fatal(err)
				}
				resources = k.Resources
				continue
			}
			o.file = filepath.Base(f)
			objs = append(objs, o)
		}
	}
	return objs, resources
}

// decodeSpec decodes o's spec into the fields the tests read.
func decodeSpec[T any](t *testing.T, o object) T {
	t.Helper()
	var v T
	if err := o.Spec.Decode(&v); err != nil {
		t.Fatalf("%s %s (%s): spec: %v", o.Kind, o.Metadata.Name, o.file, err)
	}
	return v
}

func find(objs []object, kind, name string) (object, bool) {
	for _, o := range objs {
		if o.Kind == kind && o.Metadata.Name == name {
			return o, true
		}
	}
	return object{}, false
}

// subset reports whether every label of sel is in labels (a selector
// that selects them); an empty selector selects nothing here.
func subset(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// The manifests are the expected kinds, in one namespace, all listed in
// the kustomization; every selector selects what it should.
func TestManifestKinds(t *testing.T) {
	objs, resources := loadManifests(t)
	want := map[string]string{ // kind/name -> apiVersion
		"Namespace/tailgate":           "v1",
		"Service/replicas":             "v1",
		"Service/tailgate":             "v1",
		"Service/tailgate-admin":       "v1",
		"ConfigMap/tailgate-config":    "v1",
		"Deployment/tailgate":          "apps/v1",
		"PodDisruptionBudget/tailgate": "policy/v1",
		"ServiceMonitor/tailgate":      "monitoring.coreos.com/v1",
	}
	got := map[string]string{}
	files := map[string]bool{}
	for _, o := range objs {
		key := o.Kind + "/" + o.Metadata.Name
		if _, dup := got[key]; dup {
			t.Errorf("%s twice", key)
		}
		got[key] = o.APIVersion
		files[o.file] = true
		if o.Kind != "Namespace" && o.Metadata.Namespace != "tailgate" {
			t.Errorf("%s (%s): namespace %q, want tailgate", key, o.file, o.Metadata.Namespace)
		}
	}
	if !maps.Equal(got, want) {
		t.Fatalf("objects (kind/name: apiVersion):\n got %v\nwant %v", got, want)
	}
	if resources == nil {
		t.Fatal("no kustomization.yaml with resources")
	}
	if listed := slices.Sorted(slices.Values(resources)); !slices.Equal(listed, slices.Sorted(maps.Keys(files))) {
		t.Errorf("kustomization resources %v, want every manifest: %v", listed, slices.Sorted(maps.Keys(files)))
	}

	dep, _ := find(objs, "Deployment", "tailgate")
	d := decodeSpec[deploymentSpec](t, dep)
	pods := d.Template.Metadata.Labels
	if !subset(d.Selector.MatchLabels, pods) {
		t.Errorf("the Deployment's selector %v does not select its pods %v", d.Selector.MatchLabels, pods)
	}
	if d.Replicas != 3 {
		t.Errorf("the Deployment runs %d gateways, want 3", d.Replicas)
	}
	pdbObj, _ := find(objs, "PodDisruptionBudget", "tailgate")
	pdb := decodeSpec[pdbSpec](t, pdbObj)
	if !subset(pdb.Selector.MatchLabels, pods) {
		t.Errorf("the PodDisruptionBudget's selector %v does not select the gateways %v", pdb.Selector.MatchLabels, pods)
	}
	// It must let a drain take one pod, and keep at least one.
	switch {
	case pdb.MaxUnavailable != nil && pdb.MinAvailable == nil:
		if *pdb.MaxUnavailable < 1 || *pdb.MaxUnavailable >= d.Replicas {
			t.Errorf("maxUnavailable %d of %d gateways: want 1 to %d", *pdb.MaxUnavailable, d.Replicas, d.Replicas-1)
		}
	case pdb.MinAvailable != nil && pdb.MaxUnavailable == nil:
		if *pdb.MinAvailable < 1 || *pdb.MinAvailable >= d.Replicas {
			t.Errorf("minAvailable %d of %d gateways: want 1 to %d", *pdb.MinAvailable, d.Replicas, d.Replicas-1)
		}
	default:
		t.Error("the PodDisruptionBudget wants exactly one of minAvailable and maxUnavailable")
	}
	for _, name := range []string{"tailgate", "tailgate-admin"} {
		o, _ := find(objs, "Service", name)
		if s := decodeSpec[serviceSpec](t, o); !subset(s.Selector, pods) {
			t.Errorf("Service %s: selector %v does not select the gateways %v", name, s.Selector, pods)
		}
	}
	rep, _ := find(objs, "Service", "replicas")
	if s := decodeSpec[serviceSpec](t, rep); s.ClusterIP != "None" {
		t.Errorf("Service replicas: clusterIP %q, want None (headless: one DNS record per replica)", s.ClusterIP)
	} else if subset(s.Selector, pods) {
		t.Errorf("Service replicas selects the gateways themselves (%v)", s.Selector)
	}
}

// dockerfile is what the tests read from the Dockerfile.
type dockerfile struct {
	from       []string // each stage's FROM line, after FROM
	buildRun   string   // the build stage's RUN line with go build
	user       string
	expose     []string
	entrypoint []string
}

func readDockerfile(t *testing.T) dockerfile {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var d dockerfile
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		l := strings.TrimSpace(lines.Text())
		instr, rest, _ := strings.Cut(l, " ")
		rest = strings.TrimSpace(rest)
		switch strings.ToUpper(instr) {
		case "FROM":
			d.from = append(d.from, rest)
		case "RUN":
			if strings.Contains(rest, "go build") {
				if len(d.from) != 1 || d.buildRun != "" {
					t.Fatalf("Dockerfile: go build outside the build stage, or twice: %q", l)
				}
				d.buildRun = rest
			}
		case "USER":
			d.user = rest
		case "EXPOSE":
			d.expose = append(d.expose, strings.Fields(rest)...)
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(rest), &d.entrypoint); err != nil {
				t.Fatalf("Dockerfile: ENTRYPOINT %s: want the exec form (a JSON array): %v", rest, err)
			}
		}
	}
	if err := lines.Err(); err != nil {
		t.Fatal(err)
	}
	return d
}

// goVersion is the go directive's major.minor in go.mod ("1.26").
func goVersion(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for l := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "go "); ok {
			parts := strings.Split(v, ".")
			return parts[0] + "." + parts[1]
		}
	}
	t.Fatal("go.mod: no go directive")
	return ""
}

// The image is two stages: the go.mod's Go release building
// ./cmd/tailgate with CGO_ENABLED=0, as CI builds it (go vet ./... and go
// test ./... compile the same package), and a static base running it as
// a non-root user, listening on the ports it exposes.
func TestDockerfile(t *testing.T) {
	d := readDockerfile(t)
	if len(d.from) != 2 {
		t.Fatalf("Dockerfile: %d stages, want 2 (build, run): %q", len(d.from), d.from)
	}
	if want := "golang:" + goVersion(t) + " AS build"; !strings.EqualFold(d.from[0], want) {
		t.Errorf("build stage FROM %q, want %q (go.mod's Go)", d.from[0], want)
	}
	if base := d.from[1]; base != "scratch" && !strings.HasPrefix(base, "gcr.io/distroless/static") {
		t.Errorf("run stage FROM %q, want scratch or gcr.io/distroless/static (the binary is static)", base)
	}
	const build = "CGO_ENABLED=0 go build -o /out/tailgate ./cmd/tailgate"
	if d.buildRun != build {
		t.Errorf("build stage RUN %q, want %q", d.buildRun, build)
	}
	uid, _, _ := strings.Cut(d.user, ":")
	if n, err := strconv.Atoi(uid); err != nil || n == 0 {
		t.Errorf("USER %q: want a numeric non-root uid (runAsNonRoot can check only a number)", d.user)
	}
	if len(d.entrypoint) < 2 || d.entrypoint[0] != "/tailgate" || d.entrypoint[1] != "serve" {
		t.Fatalf("ENTRYPOINT %q: want /tailgate serve ...", d.entrypoint)
	}
	var stderr bytes.Buffer
	f, code, err := loadServeFlags(d.entrypoint[2:], io.Discard, &stderr)
	if code >= 0 || err != nil {
		t.Fatalf("ENTRYPOINT flags %q refused by serve: exit %d, %v %s", d.entrypoint[2:], code, err, stderr.String())
	}
	for _, addr := range []string{f.listen, f.admin} {
		host, port, err := net.SplitHostPort(addr)
		if err != nil || host != "0.0.0.0" || !slices.Contains(d.expose, port) {
			t.Errorf("ENTRYPOINT listens on %q: want 0.0.0.0 (inside the container) on a port it EXPOSEs (%v)", addr, d.expose)
		}
	}

	// The build line, as the build stage runs it, without compiling: with
	// CGO_ENABLED=0 the package and its dependencies resolve, and
	// runtime/cgo is not among them, so the binary is static and runs on
	// a base with no C library.
	env, args, _ := strings.Cut(build, " go build ")
	fields := strings.Fields(args)
	pkg := fields[len(fields)-1]
	cmd := exec.Command(goTool(t), "list", "-deps", "-f", "{{.ImportPath}}{{with .Error}} ERROR {{.}}{{end}}", pkg)
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), env)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s go list -deps %s: %v\n%s", env, pkg, err, out)
	}
	deps := strings.Fields(string(out))
	if slices.Contains(deps, "ERROR") || !slices.Contains(deps, "github.com/tailgate-dev/tailgate/gateway") {
		t.Errorf("%s go list -deps %s:\n%s", env, pkg, out)
	}
	if slices.Contains(deps, "runtime/cgo") {
		t.Errorf("with %s, %s still depends on runtime/cgo: the binary would not be static", env, pkg)
	}
}

// goTool is the go command of the toolchain running the test.
func goTool(t *testing.T) string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	p := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(p); err != nil {
		t.Skip("no go command to list the build's packages")
	}
	return p
}

// The gateway's container runs the image's ENTRYPOINT with the
// Deployment's args, reading the ConfigMap as -config: together they must
// parse with the real serve flags and make a valid configuration; the
// probes, ports, drain timing and security settings must agree with it.
func TestDeploymentRunsServe(t *testing.T) {
	objs, _ := loadManifests(t)
	dep, ok := find(objs, "Deployment", "tailgate")
	if !ok {
		t.Fatal("no Deployment tailgate")
	}
	d := decodeSpec[deploymentSpec](t, dep)
	pod := d.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	if len(c.Command) != 0 {
		t.Errorf("command %q replaces the image's ENTRYPOINT: give serve's flags as args", c.Command)
	}
	df := readDockerfile(t)

	// -config names the ConfigMap's file where its volume is mounted;
	// the test gives serve that file's content at a path of its own.
	args := slices.Clone(c.Args)
	i := slices.Index(args, "-config")
	if i < 0 || i+1 >= len(args) {
		t.Fatalf("args %q: no -config FILE", args)
	}
	dir, key := path.Split(args[i+1])
	var cmName string
	for _, m := range c.VolumeMounts {
		if path.Clean(m.MountPath) == path.Clean(dir) {
			for _, v := range pod.Volumes {
				if v.Name == m.Name && v.ConfigMap != nil {
					cmName = v.ConfigMap.Name
				}
			}
		}
	}
	cm, ok := find(objs, "ConfigMap", cmName)
	if cmName == "" || !ok || cm.Data[key] == "" {
		t.Fatalf("-config %s: no ConfigMap volume mounted at %s with a key %q", args[i+1], dir, key)
	}
	file := filepath.Join(t.TempDir(), key)
	if err := os.WriteFile(file, []byte(cm.Data[key]), 0o600); err != nil {
		t.Fatal(err)
	}
	args[i+1] = file
	argv := append(slices.Clone(df.entrypoint[2:]), args...)
	var stderr bytes.Buffer
	f, code, err := loadServeFlags(argv, io.Discard, &stderr)
	if code >= 0 || err != nil {
		t.Fatalf("serve %q (the ConfigMap as -config) refused: exit %d, %v %s", argv, code, err, stderr.String())
	}
	if _, _, err := f.config(io.Discard); err != nil {
		t.Fatalf("serve %q: invalid configuration: %v", argv, err)
	}

	// The backends are the headless Service's DNS name and port.
	u, err := url.Parse(f.backends)
	if err != nil || strings.Contains(f.backends, ",") {
		t.Fatalf("-backends %q: want one dns+http:// URL", f.backends)
	}
	rep, _ := find(objs, "Service", "replicas")
	rs := decodeSpec[serviceSpec](t, rep)
	wantHost := rep.Metadata.Name + "." + rep.Metadata.Namespace + ".svc.cluster.local"
	if u.Scheme != "dns+http" || u.Hostname() != wantHost {
		t.Errorf("-backends %q: want dns+http://%s:<port>", f.backends, wantHost)
	}
	if len(rs.Ports) != 1 || u.Port() != strconv.Itoa(rs.Ports[0].Port) {
		t.Errorf("-backends port %q, want the replicas Service's port %v", u.Port(), rs.Ports)
	}

	// Ports: the container's named ports are serve's listeners.
	ports := map[string]string{}
	for _, p := range c.Ports {
		ports[p.Name] = strconv.Itoa(p.ContainerPort)
	}
	for name, addr := range map[string]string{"http": f.listen, "admin": f.admin} {
		if _, port, _ := net.SplitHostPort(addr); ports[name] != port {
			t.Errorf("container port %q is %q, serve listens on %s", name, ports[name], addr)
		}
	}

	// Probes: on the admin port, on paths the admin handler serves.
	g, err := gateway.New(gateway.Config{Backends: []string{"http://127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	admin := adminHandler(g, processRegistry(), nil)
	for _, p := range []struct {
		name, path string
		probe      *probe
		codes      []int
	}{
		{"readinessProbe", "/readyz", c.ReadinessProbe, []int{200, 503}},
		{"livenessProbe", "/healthz", c.LivenessProbe, []int{200}},
	} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("%s: want an httpGet probe", p.name)
			continue
		}
		hg := p.probe.HTTPGet
		if hg.Path != p.path || (hg.Port != "admin" && hg.Port != ports["admin"]) {
			t.Errorf("%s: GET %s on port %s, want %s on the admin port", p.name, hg.Path, hg.Port, p.path)
		}
		w := httptest.NewRecorder()
		admin.ServeHTTP(w, httptest.NewRequest("GET", hg.Path, nil))
		if !slices.Contains(p.codes, w.Code) {
			t.Errorf("%s: the admin handler answers GET %s with %d, want one of %v", p.name, hg.Path, w.Code, p.codes)
		}
	}

	// Draining: /readyz fails for -drain-delay before the listener
	// closes, long enough for the readiness probe to take the pod out of
	// the endpoints; the grace period covers the delay and the drain.
	if rp := c.ReadinessProbe; rp != nil {
		period, failures := 10, 3 // Kubernetes' defaults, for 0
		if rp.PeriodSeconds > 0 {
			period = rp.PeriodSeconds
		}
		if rp.FailureThreshold > 0 {
			failures = rp.FailureThreshold
		}
		if need := time.Duration(period*failures) * time.Second; f.drainDelay < need {
			t.Errorf("-drain-delay %v is shorter than the readiness probe's period × failureThreshold (%v)", f.drainDelay, need)
		}
	}
	grace := 30 * time.Second // Kubernetes' default
	if g := pod.TerminationGracePeriodSeconds; g != nil {
		grace = time.Duration(*g) * time.Second
	}
	if f.drainDelay+f.drain > grace {
		t.Errorf("terminationGracePeriodSeconds %v is shorter than -drain-delay %v + -drain-timeout %v: the kubelet kills the drain", grace, f.drainDelay, f.drain)
	}

	// Security: non-root (the image's user), no escalation, read-only
	// root, no capabilities; and bounded memory.
	sc := pod.SecurityContext
	uid, _, _ := strings.Cut(df.user, ":")
	if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || strconv.Itoa(*sc.RunAsUser) != uid {
		t.Errorf("pod securityContext: want runAsNonRoot true and runAsUser %s (the image's USER)", uid)
	}
	csc := c.SecurityContext
	if csc.ReadOnlyRootFilesystem == nil || !*csc.ReadOnlyRootFilesystem {
		t.Error("container securityContext: want readOnlyRootFilesystem true (the gateway writes nothing)")
	}
	if csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation {
		t.Error("container securityContext: want allowPrivilegeEscalation false")
	}
	if !slices.Equal(csc.Capabilities.Drop, []string{"ALL"}) {
		t.Errorf("container securityContext: capabilities drop %q, want [ALL]", csc.Capabilities.Drop)
	}
	if c.Resources.Requests["cpu"] == "" || c.Resources.Requests["memory"] == "" || c.Resources.Limits["memory"] == "" {
		t.Errorf("resources %+v: want cpu and memory requests and a memory limit", c.Resources)
	}
	checkMemory(t, c, f)
}

// Memory figures of the gateway (docs/performance.md, "Soak and memory"):
// a process idles at 19–25 MiB of RSS, an idle client connection costs
// about 22 KiB (heap and goroutine stack), and an attempt in flight may
// buffer a response of up to -max-response-bytes.
const (
	memBase    = 32 << 20
	memPerConn = 22 << 10
	// memShare is the share of the limit the worst case may take: the
	// rest is the collector's room (GOMEMLIMIT is the limit itself).
	memShare = 0.85
)

// checkMemory checks that the container's memory limit holds the worst
// case of the configuration f, and that GOMEMLIMIT follows the limit.
func checkMemory(t *testing.T, c container, f *serveFlags) {
	t.Helper()
	limit, err := quantityBytes(c.Resources.Limits["memory"])
	if err != nil {
		t.Fatalf("memory limit: %v", err)
	}
	attempts := f.maxAttempts
	if attempts == 0 {
		attempts = f.maxRequests * 5 / 4 // serve's default: max-requests × 1.25
	}
	conns, bodies := int64(f.maxConns)*memPerConn, int64(attempts)*f.maxBody
	if need := memBase + conns + bodies; float64(need) > memShare*float64(limit) {
		t.Errorf("memory limit %s: the configuration needs up to %d MiB (base %d, -max-conns %d × 22 KiB = %d, %d attempts × -max-response-bytes %d = %d), over %.0f%% of the limit",
			c.Resources.Limits["memory"], need>>20, memBase>>20, f.maxConns, conns>>20, attempts, f.maxBody, bodies>>20, 100*memShare)
	}
	var ref bool
	for _, e := range c.Env {
		if e.Name != "GOMEMLIMIT" {
			continue
		}
		r := e.ValueFrom
		// Bytes: GOMEMLIMIT reads a bare number as bytes, so the divisor
		// must be 1 (another, 1Mi, would make 256 bytes of 256Mi).
		ref = r != nil && r.ResourceFieldRef != nil && r.ResourceFieldRef.Resource == "limits.memory" &&
			(r.ResourceFieldRef.Divisor == "" || r.ResourceFieldRef.Divisor == "1") &&
			(r.ResourceFieldRef.ContainerName == "" || r.ResourceFieldRef.ContainerName == c.Name)
	}
	if !ref {
		t.Errorf("env %+v: want GOMEMLIMIT from the container's limits.memory (resourceFieldRef, divisor 1)", c.Env)
	}
}

// quantityBytes reads a Kubernetes memory quantity in the forms the
// manifests use: a number of bytes, or one with a binary (Ki, Mi, Gi) or
// decimal (k, M, G) suffix.
func quantityBytes(q string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"k", 1e3}, {"M", 1e6}, {"G", 1e9}}
	for _, u := range units {
		if n, ok := strings.CutSuffix(q, u.suffix); ok {
			v, err := strconv.ParseInt(n, 10, 64)
			return v * u.mult, err
		}
	}
	return strconv.ParseInt(q, 10, 64)
}

// The ServiceMonitor scrapes /metrics on the admin port of exactly one
// Service, the admin one, whose port reaches the container's admin port.
func TestServiceMonitorScrapesAdmin(t *testing.T) {
	objs, _ := loadManifests(t)
	smObj, ok := find(objs, "ServiceMonitor", "tailgate")
	if !ok {
		t.Fatal("no ServiceMonitor tailgate")
	}
	sm := decodeSpec[serviceMonitorSpec](t, smObj)
	var matched []object
	for _, o := range objs {
		if o.Kind == "Service" && subset(sm.Selector.MatchLabels, o.Metadata.Labels) && slices.Contains(sm.NamespaceSelector.MatchNames, o.Metadata.Namespace) {
			matched = append(matched, o)
		}
	}
	if len(matched) != 1 || matched[0].Metadata.Name != "tailgate-admin" {
		var names []string
		for _, o := range matched {
			names = append(names, o.Metadata.Name)
		}
		t.Fatalf("the ServiceMonitor selects Services %v, want only tailgate-admin", names)
	}
	svc := decodeSpec[serviceSpec](t, matched[0])
	if len(sm.Endpoints) != 1 {
		t.Fatalf("%d endpoints, want 1", len(sm.Endpoints))
	}
	ep := sm.Endpoints[0]
	i := slices.IndexFunc(svc.Ports, func(p servicePort) bool { return p.Name == ep.Port })
	if i < 0 || svc.Ports[i].TargetPort != "admin" || ep.Path != "/metrics" {
		t.Errorf("endpoint port %q path %q: want a tailgate-admin port named so, targeting the container's admin port, and /metrics (ports %+v)", ep.Port, ep.Path, svc.Ports)
	}
	client, _ := find(objs, "Service", "tailgate")
	for _, p := range decodeSpec[serviceSpec](t, client).Ports {
		if p.TargetPort == "admin" || p.Port == 9090 {
			t.Errorf("the clients' Service exposes the admin port: %+v", p)
		}
	}
	g, err := gateway.New(gateway.Config{Backends: []string{"http://127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	w := httptest.NewRecorder()
	adminHandler(g, processRegistry(), nil).ServeHTTP(w, httptest.NewRequest("GET", ep.Path, nil))
	if w.Code != 200 || !strings.Contains(w.Body.String(), "tailgate_hedge_budget_fraction") {
		t.Errorf("GET %s on the admin handler: %d, want 200 with the budget's gauges", ep.Path, w.Code)
	}
}
