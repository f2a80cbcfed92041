package layer

// Kind says where a layer comes from.
type Kind string

// The kinds of layers, in the order they are searched (nearest first).
const (
	// KindProject is a project .aerie/ (or .osprey/) directory in the
	// workspace. Its executables need trust pins.
	KindProject Kind = "project"
	// KindSpec is a layer listed in the AgentSession's spec.extensions.
	KindSpec Kind = "spec"
	// KindNamespace is a ConfigMap labelled aerie.run/layer in the
	// session's namespace.
	KindNamespace Kind = "namespace"
	// KindPlatform is a platform layer from the controller's namespace.
	KindPlatform Kind = "platform"
	// KindHome is $AERIE_HOME: the user's (or the agent's) own artifacts.
	KindHome Kind = "home"
	// KindBundled holds the artifacts bundled into the binary.
	KindBundled Kind = "bundled"
)

// Layer is one directory of extension artifacts.
type Layer struct {
	// Name identifies the layer in reports and logs: a project-relative
	// path, "spec[0]", a ConfigMap name, "home", "bundled".
	Name string `json:"name"`
	// Dir is the layer's absolute directory. Programs in it (custom tools,
	// hook scripts) are run by the executor from this path, so in a pod
	// it is a path both containers see.
	Dir string `json:"dir"`
	// Kind is where the layer comes from.
	Kind Kind `json:"kind"`
	// Digest is the content digest of the layer ("sha256:…"), when known:
	// the controller's for a ConfigMap layer, ContentDigest's otherwise.
	Digest string `json:"digest,omitempty"`
	// Source says what holds the layer when its directory does not: the
	// ConfigMap, volume or image mounted at Dir in a pod
	// ("configmap/go-tools", "pvc/skills/team-a"). Empty for a local
	// directory.
	Source string `json:"source,omitempty"`
	// IgnorePins turns the layer's trust.toml off: the session's trust
	// sources (an AgentSession's spec.trust.sources) leave its kind out.
	IgnorePins bool `json:"ignore_pins,omitempty"`
}

// Private reports whether the layer is controlled by whoever runs the
// session (spec, namespace, platform, home and bundled layers) rather than
// by the workspace's contents. Malformed artifacts in private layers are
// errors; in project layers they are skipped with a reason.
func (l Layer) Private() bool { return l.Kind != KindProject }

// Pinnable reports whether trust pins read from this layer are honoured:
// only layers the submitter controls, never the workspace, and not those
// the session's trust sources leave out.
func (l Layer) Pinnable() bool {
	if l.IgnorePins {
		return false
	}
	switch l.Kind {
	case KindSpec, KindNamespace, KindPlatform, KindHome:
		return true
	}
	return false
}

// NeedsTrust reports whether executables in the layer run only with a
// matching trust pin: those of the workspace.
func (l Layer) NeedsTrust() bool { return l.Kind == KindProject }
