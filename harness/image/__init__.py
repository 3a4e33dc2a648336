"""Build the reconciler image from the repository's Dockerfile and run it as the Deployment does.

Development tooling (`make image`, the container e2e test): nothing shipped at run time imports
it. The engine is whatever is at hand (docker with a daemon, else podman); when the Dockerfile's
base cannot be pulled it is made from Debian packages, so the unchanged Dockerfile builds offline.
"""
