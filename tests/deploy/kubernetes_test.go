package deploy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/kvorum/kvorum/internal/admin"
)

// The parts of the Kubernetes objects in deploy/kubernetes that the
// tests look at.

type objectMeta struct {
	Name   string            `yaml:"name"`
	Labels map[string]string `yaml:"labels"`
}

type k8sObject struct {
	APIVersion string     `yaml:"apiVersion"`
	Kind       string     `yaml:"kind"`
	Metadata   objectMeta `yaml:"metadata"`
	file       string
	node       *yaml.Node
}

type labelSelector struct {
	MatchLabels map[string]string `yaml:"matchLabels"`
}

type serviceSpec struct {
	ClusterIP                string            `yaml:"clusterIP"`
	PublishNotReadyAddresses bool              `yaml:"publishNotReadyAddresses"`
	Selector                 map[string]string `yaml:"selector"`
	Ports                    []struct {
		Name       string `yaml:"name"`
		Port       int    `yaml:"port"`
		TargetPort string `yaml:"targetPort"`
	} `yaml:"ports"`
}

type probe struct {
	HTTPGet *struct {
		Path string `yaml:"path"`
		Port string `yaml:"port"`
	} `yaml:"httpGet"`
}

type container struct {
	Name    string   `yaml:"name"`
	Image   string   `yaml:"image"`
	Command []string `yaml:"command"`
	Args    []string `yaml:"args"`
	Env     []struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom *struct {
			FieldRef *struct {
				FieldPath string `yaml:"fieldPath"`
			} `yaml:"fieldRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	ReadinessProbe *probe `yaml:"readinessProbe"`
	LivenessProbe  *probe `yaml:"livenessProbe"`
	StartupProbe   *probe `yaml:"startupProbe"`
	Resources      struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

type statefulSetSpec struct {
	ServiceName         string        `yaml:"serviceName"`
	Replicas            int           `yaml:"replicas"`
	PodManagementPolicy string        `yaml:"podManagementPolicy"`
	Selector            labelSelector `yaml:"selector"`
	Template            struct {
		Metadata objectMeta `yaml:"metadata"`
		Spec     struct {
			SecurityContext struct {
				RunAsNonRoot *bool  `yaml:"runAsNonRoot"`
				RunAsUser    *int64 `yaml:"runAsUser"`
				FSGroup      *int64 `yaml:"fsGroup"`
			} `yaml:"securityContext"`
			Containers []container `yaml:"containers"`
		} `yaml:"spec"`
	} `yaml:"template"`
	VolumeClaimTemplates []struct {
		Metadata objectMeta `yaml:"metadata"`
		Spec     struct {
			AccessModes []string `yaml:"accessModes"`
		} `yaml:"spec"`
	} `yaml:"volumeClaimTemplates"`
}

type pdbSpec struct {
	MaxUnavailable *int          `yaml:"maxUnavailable"`
	MinAvailable   *int          `yaml:"minAvailable"`
	Selector       labelSelector `yaml:"selector"`
}

// spec decodes o's spec into v.
func (o k8sObject) spec(t *testing.T, v any) {
	t.Helper()
	var whole struct {
		Spec yaml.Node `yaml:"spec"`
	}
	if err := o.node.Decode(&whole); err != nil {
		t.Fatalf("%s: %s %s: %v", o.file, o.Kind, o.Metadata.Name, err)
	}
	if err := whole.Spec.Decode(v); err != nil {
		t.Fatalf("%s: %s %s: spec: %v", o.file, o.Kind, o.Metadata.Name, err)
	}
}

// loadManifests parses every YAML document of deploy/kubernetes/*.yaml.
func loadManifests(t *testing.T, dir string) []k8sObject {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s: %v", dir, err)
	}
	var objs []k8sObject
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		for i := 1; ; i++ {
			var n yaml.Node
			if err := dec.Decode(&n); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: document %d: %v", file, i, err)
			}
			o := k8sObject{file: filepath.Base(file), node: &n}
			if err := n.Decode(&o); err != nil {
				t.Fatalf("%s: document %d: %v", file, i, err)
			}
			if o.APIVersion == "" || o.Kind == "" {
				t.Fatalf("%s: document %d has no apiVersion or kind", file, i)
			}
			objs = append(objs, o)
		}
	}
	return objs
}

// subset reports whether every label of sel is in labels.
func subset(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false // selects everything: not what is meant here
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// argValue returns the value of --name=VALUE or --name VALUE in args.
func argValue(args []string, name string) (string, bool) {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
		if a == "--"+name && i+1 < len(args) {
			return args[i+1], true
		}
	}
	return "", false
}

// expandK8s expands $(VAR) references as Kubernetes does in a container's
// command and args: a defined variable is replaced, $$ escapes a $, and
// an undefined reference is left as it is.
var k8sVarRef = regexp.MustCompile(`\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

func expandK8s(s string, env map[string]string) string {
	return k8sVarRef.ReplaceAllStringFunc(s, func(m string) string {
		if m == "$$" {
			return "$"
		}
		if v, ok := env[m[2:len(m)-1]]; ok {
			return v
		}
		return m
	})
}

// The kvorum binary the tests run, built once per test binary with the
// flags of `make build` (so the build cache serves `make image` too).
var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	removeImage()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// buildKvorum returns the path of a kvorum binary built from root.
func buildKvorum(t *testing.T, root string) string {
	t.Helper()
	binOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "kvorum-deploy-test"); binErr != nil {
			return
		}
		bin := filepath.Join(binDir, "kvorum")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		out, err := run(ctx, root, []string{"CGO_ENABLED=0"}, goTool(), "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, "./cmd/kvorum")
		if err != nil {
			binErr = fmt.Errorf("go build ./cmd/kvorum: %v\n%s", err, out)
			return
		}
		binPath = bin
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// validate runs `kvorum start ... --validate-config` with args (start
// included) and returns its exit code and output.
func validate(t *testing.T, bin string, args []string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(append([]string(nil), args...), "--validate-config")...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &ee):
		return ee.ExitCode(), string(out)
	default:
		t.Fatalf("%s %v: %v\n%s", bin, args, err, out)
		return -1, ""
	}
}

// stubNode is an admin.NodeAPI whose readiness the test sets.
type stubNode struct{ ready bool }

func (s *stubNode) Status() admin.Status {
	if s.ready {
		return admin.Status{NodeID: 1, Leader: 1, Ready: true}
	}
	return admin.Status{NodeID: 1}
}
func (s *stubNode) AddMember(context.Context, uint64, string) error { return nil }
func (s *stubNode) RemoveMember(context.Context, uint64) error      { return nil }
func (s *stubNode) TransferLeader(context.Context, uint64) error    { return nil }
func (s *stubNode) Ranges() admin.RangesResponse                    { return admin.RangesResponse{} }

// adminGet returns the status code of GET path on an admin server whose
// node is ready or not, with a token configured (the probes send none).
func adminGet(t *testing.T, path string, ready bool) int {
	t.Helper()
	srv := admin.New(admin.Config{Node: &stubNode{ready: ready}, Token: "secret"})
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code
}

// TestKubernetesManifests checks deploy/kubernetes: its objects and how
// they fit together, the probes against the admin server's own paths,
// and the container's command line, expanded as Kubernetes would for the
// pods kvorum-0 to kvorum-3, through `kvorum start --validate-config`.
func TestKubernetesManifests(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "deploy", "kubernetes")
	objs := loadManifests(t, dir)
	byKind := map[string][]k8sObject{}
	for _, o := range objs {
		byKind[o.Kind] = append(byKind[o.Kind], o)
	}
	for kind, n := range map[string]int{"StatefulSet": 1, "Service": 2, "PodDisruptionBudget": 1, "Kustomization": 1} {
		if len(byKind[kind]) != n {
			t.Fatalf("%d %s objects in %s, want %d", len(byKind[kind]), kind, dir, n)
		}
	}

	// The kustomization lists every other file.
	var kust struct {
		Resources []string `yaml:"resources"`
	}
	if err := byKind["Kustomization"][0].node.Decode(&kust); err != nil {
		t.Fatal(err)
	}
	files := map[string]bool{}
	for _, o := range objs {
		if o.Kind != "Kustomization" {
			files[o.file] = true
		}
	}
	sort.Strings(kust.Resources)
	var want []string
	for f := range files {
		want = append(want, f)
	}
	sort.Strings(want)
	if strings.Join(kust.Resources, " ") != strings.Join(want, " ") {
		t.Errorf("kustomization.yaml resources %v, want the other files %v", kust.Resources, want)
	}

	sts := byKind["StatefulSet"][0]
	var ss statefulSetSpec
	sts.spec(t, &ss)
	podLabels := ss.Template.Metadata.Labels
	if !subset(ss.Selector.MatchLabels, podLabels) {
		t.Errorf("StatefulSet selector %v does not match its pod labels %v", ss.Selector.MatchLabels, podLabels)
	}
	if ss.Replicas != 3 {
		t.Errorf("replicas %d, want 3", ss.Replicas)
	}
	if ss.PodManagementPolicy != "Parallel" {
		t.Errorf("podManagementPolicy %q: the founding pods must start together (none is ready before a majority runs)", ss.PodManagementPolicy)
	}

	// Services: a headless one named by serviceName, whose names exist
	// before the pods are ready, and a client one on 6379.
	var headless, client *serviceSpec
	for _, o := range byKind["Service"] {
		var s serviceSpec
		o.spec(t, &s)
		if !subset(s.Selector, podLabels) {
			t.Errorf("Service %s selector %v does not match the pod labels %v", o.Metadata.Name, s.Selector, podLabels)
		}
		if s.ClusterIP == "None" {
			if o.Metadata.Name != ss.ServiceName {
				t.Errorf("headless Service %s is not the StatefulSet's serviceName %q", o.Metadata.Name, ss.ServiceName)
			}
			if !s.PublishNotReadyAddresses {
				t.Errorf("headless Service %s: publishNotReadyAddresses must be true (peers must resolve each other before any is ready)", o.Metadata.Name)
			}
			headless = &s
		} else {
			client = &s
		}
	}
	if headless == nil || client == nil {
		t.Fatalf("want a headless Service (clusterIP: None) and a client Service")
	}
	clientPort := false
	for _, p := range client.Ports {
		clientPort = clientPort || p.Port == 6379
	}
	if !clientPort {
		t.Errorf("the client Service has no port 6379: %+v", client.Ports)
	}

	var pdb pdbSpec
	byKind["PodDisruptionBudget"][0].spec(t, &pdb)
	if pdb.MaxUnavailable == nil || *pdb.MaxUnavailable != 1 || pdb.MinAvailable != nil {
		t.Errorf("PodDisruptionBudget: want maxUnavailable 1 and no minAvailable, got %+v", pdb)
	}
	if !subset(pdb.Selector.MatchLabels, podLabels) {
		t.Errorf("PodDisruptionBudget selector %v does not match the pod labels %v", pdb.Selector.MatchLabels, podLabels)
	}

	// The pod: the image's user, a volume per pod at --data-dir.
	sc := ss.Template.Spec.SecurityContext
	uid := imageUser(t, root)
	if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser != uid || sc.FSGroup == nil {
		t.Errorf("pod securityContext: want runAsNonRoot, runAsUser %d (the Dockerfile's USER) and fsGroup", uid)
	}
	if len(ss.Template.Spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(ss.Template.Spec.Containers))
	}
	c := ss.Template.Spec.Containers[0]
	for _, kind := range []string{"cpu", "memory"} {
		if c.Resources.Requests[kind] == "" || c.Resources.Limits[kind] == "" {
			t.Errorf("container resources: want requests and limits of %s, got %+v", kind, c.Resources)
		}
	}
	ports := map[string]int{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	for _, s := range []*serviceSpec{headless, client} {
		for _, p := range s.Ports {
			if _, ok := ports[p.TargetPort]; !ok {
				t.Errorf("Service port %s targets %q, not a container port (%v)", p.Name, p.TargetPort, ports)
			}
		}
	}
	dataDir, _ := argValue(c.Args, "data-dir")
	if len(ss.VolumeClaimTemplates) != 1 || len(c.VolumeMounts) != 1 ||
		c.VolumeMounts[0].Name != ss.VolumeClaimTemplates[0].Metadata.Name || c.VolumeMounts[0].MountPath != dataDir || dataDir == "" {
		t.Errorf("want one volume claim template mounted at --data-dir %q, got mounts %+v", dataDir, c.VolumeMounts)
	}

	// Probes: on the admin port, at paths the admin server serves without
	// the token; /readyz follows readiness.
	adminAddr, _ := argValue(c.Args, "admin-addr")
	for _, p := range []struct {
		name string
		pr   *probe
		path string
	}{{"readinessProbe", c.ReadinessProbe, "/readyz"}, {"livenessProbe", c.LivenessProbe, "/healthz"}, {"startupProbe", c.StartupProbe, "/healthz"}} {
		if p.pr == nil || p.pr.HTTPGet == nil {
			t.Errorf("%s: want an httpGet probe", p.name)
			continue
		}
		if p.pr.HTTPGet.Path != p.path {
			t.Errorf("%s: path %q, want %q", p.name, p.pr.HTTPGet.Path, p.path)
		}
		if port := ports[p.pr.HTTPGet.Port]; port == 0 || !strings.HasSuffix(adminAddr, ":"+strconv.Itoa(port)) {
			t.Errorf("%s: port %q (%d) is not the port of --admin-addr %q", p.name, p.pr.HTTPGet.Port, port, adminAddr)
		}
		if code := adminGet(t, p.pr.HTTPGet.Path, true); code != http.StatusOK {
			t.Errorf("%s: the admin server answers GET %s with %d on a ready node", p.name, p.pr.HTTPGet.Path, code)
		}
	}
	if code := adminGet(t, "/readyz", false); code != http.StatusServiceUnavailable {
		t.Errorf("GET /readyz on a node without a leader: %d, want 503", code)
	}
	if code := adminGet(t, "/no-such-probe", true); code != http.StatusNotFound && code != http.StatusUnauthorized {
		t.Errorf("GET of an unknown path: %d (the checks above would not tell)", code)
	}

	// The command line of every pod, expanded as Kubernetes would.
	bin := buildKvorum(t, root)
	argv := func(ordinal int) []string {
		env := map[string]string{}
		for _, e := range c.Env {
			switch {
			case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
				env[e.Name] = fmt.Sprintf("%s-%d", sts.Metadata.Name, ordinal)
			case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
				env[e.Name] = "kvorum-test"
			case e.ValueFrom == nil:
				env[e.Name] = e.Value
			default:
				t.Fatalf("env %s: a source the test does not know", e.Name)
			}
		}
		cmd := append(append([]string(nil), c.Command...), c.Args...)
		if len(c.Command) == 0 {
			cmd = append([]string{"/kvorum"}, c.Args...) // the image's ENTRYPOINT
		}
		for i := range cmd {
			cmd[i] = expandK8s(cmd[i], env)
			if strings.Contains(cmd[i], "$(") {
				t.Fatalf("pod %d: %q refers to an undefined variable", ordinal, cmd[i])
			}
		}
		if cmd[0] != "/kvorum" || len(cmd) < 2 || cmd[1] != "start" {
			t.Fatalf("the container runs %v, want /kvorum start ...", cmd)
		}
		return cmd[1:]
	}
	for ordinal := 0; ordinal <= 3; ordinal++ {
		args := argv(ordinal)
		code, out := validate(t, bin, args)
		pod := fmt.Sprintf("%s-%d", sts.Metadata.Name, ordinal)
		fqdn := fmt.Sprintf("%s.%s.kvorum-test.svc.cluster.local", pod, ss.ServiceName)
		wantRole := fmt.Sprintf("ordinal %d: node %d founds a cluster of 3", ordinal, ordinal+1)
		if ordinal >= 3 {
			wantRole = fmt.Sprintf("ordinal %d: node %d joins through ", ordinal, ordinal+1)
		}
		if code != 0 || !strings.Contains(out, wantRole) || !strings.Contains(out, "advertised "+fqdn+":7379") {
			t.Errorf("%s: kvorum %s --validate-config: exit %d, %q; want exit 0, %q, advertised %s", pod, strings.Join(args, " "), code, out, wantRole, fqdn)
		} else {
			t.Logf("%s: %s", pod, strings.TrimSpace(out))
		}
	}
	// Broken command lines fail the same check.
	for name, mutate := range map[string]func([]string) []string{
		"a bad flag value": func(a []string) []string { return append(a, "--tick-interval=0s") },
		"an unknown flag":  func(a []string) []string { return append(a, "--no-such-flag") },
		"no --join for ordinal 3": func(a []string) []string {
			var out []string
			for _, s := range a {
				if !strings.HasPrefix(s, "--join=") {
					out = append(out, s)
				}
			}
			return out
		},
	} {
		code, out := validate(t, bin, mutate(argv(3)))
		if code == 0 {
			t.Errorf("%s: exit 0, want an error: %s", name, out)
		}
	}

	// kubectl, if installed, builds the kustomization.
	if kubectl, err := exec.LookPath("kubectl"); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if out, err := run(ctx, root, nil, kubectl, "kustomize", dir); err != nil {
			t.Errorf("kubectl kustomize %s: %v\n%s", dir, err, out)
		}
	}
}

// TestComposeCommands runs every service's command in deploy/compose.yaml
// through `kvorum start --validate-config`.
func TestComposeCommands(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	bin := buildKvorum(t, root)
	for _, file := range []string{"compose.yaml", "compose.hostnet.yaml"} {
		b, err := os.ReadFile(filepath.Join(root, "deploy", file))
		if err != nil {
			t.Fatal(err)
		}
		var compose struct {
			Services map[string]struct {
				Command []string `yaml:"command"`
			} `yaml:"services"`
		}
		if err := yaml.Unmarshal(b, &compose); err != nil {
			t.Fatalf("deploy/%s: %v", file, err)
		}
		if len(compose.Services) != 3 {
			t.Fatalf("%d services in deploy/%s, want 3", len(compose.Services), file)
		}
		for name, s := range compose.Services {
			id := strings.TrimPrefix(name, "kvorum-")
			for i := range s.Command {
				s.Command[i] = expandCompose(s.Command[i])
			}
			code, out := validate(t, bin, s.Command)
			if want := "node " + id + " founds a cluster of 3"; code != 0 || !strings.Contains(out, want) {
				t.Errorf("%s %s: kvorum %s --validate-config: exit %d, %q; want exit 0, %q", file, name, strings.Join(s.Command, " "), code, out, want)
			} else {
				t.Logf("%s %s: %s", file, name, strings.TrimSpace(out))
			}
			code, out = validate(t, bin, append(append([]string(nil), s.Command...), "--peer-addr=0.0.0.0:99999"))
			if code == 0 {
				t.Errorf("%s %s with a bad --peer-addr: exit 0: %s", file, name, out)
			}
		}
	}
}

// expandCompose expands ${VAR:-default} as Compose does with VAR unset.
func expandCompose(s string) string {
	return regexp.MustCompile(`\$\{[A-Za-z0-9_]+:-([^}]*)\}`).ReplaceAllString(s, "$1")
}

// imageUser returns the numeric user of the Dockerfile's USER line.
func imageUser(t *testing.T, root string) int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^USER\s+(\d+)`).FindSubmatch(b)
	if m == nil {
		t.Fatal("no numeric USER in the Dockerfile")
	}
	uid, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return uid
}
