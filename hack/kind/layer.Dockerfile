# An extension layer as an OCI image: the files at its root are the layer's files. hack/kind.sh
# builds it from hack/kind/layer/ and the sample session mounts it with spec.extensions[].image.
FROM scratch
COPY scripted/ /scripted/
