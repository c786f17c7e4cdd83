# Tollgate image: one image runs the gateway (`serve`, the default) and the reference upstream (`petstore`).
# Build: docker build -t tollgate .
# Run:   docker run --rm -p 8080:8080 -e UPSTREAM_URL=http://upstream.example:8081 -e REDIS_URL=redis://redis.example:6379/0 tollgate
# The gateway listens on all interfaces (HOST below), so the published port reaches it. docs/kubernetes.md has more.
# Built from Node.js 24, the active LTS line (maintained until April 2028); scripts/check-compose.mjs checks it.

# ---- build stage: full dependencies, compile TypeScript to dist/
FROM node:24-bookworm-slim AS build
WORKDIR /app
# Manifests first, so the dependency layer is cached until package*.json change.
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json ./
COPY src ./src
RUN npm run build

# ---- runtime stage: production dependencies, compiled code and config only
FROM node:24-bookworm-slim AS runtime
ENV NODE_ENV=production
# All interfaces: config/gateway.yaml says 127.0.0.1, which inside a container no published port or Service reaches.
# HOST overrides server.host; the ops and admin listeners keep their own (loopback) addresses unless configured.
ENV HOST=0.0.0.0
# V8's young generation at the size Node.js 20 gave it. On Node.js 22 and 24 the default grows with the host's memory
# (semi-spaces of up to 64 MB on a large host): under the bench's load the gateway then held 256-356 MB, against
# 173-218 MB at 16, where a bare Express proxy with V8's defaults held 156-210 MB (bench/README.md, "Memory on Node.js
# 24"). A NODE_OPTIONS given to the container replaces this one.
ENV NODE_OPTIONS="--max-semi-space-size=16"
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
COPY config ./config
# Served by the admin API at GET /openapi.json (read at start-up when an admin token is configured).
COPY docs/admin.openapi.yaml ./docs/admin.openapi.yaml
# config/gateway.yaml takes the upstream's routes from the pet store's OpenAPI document (upstream.openapi), and so
# does `tollgate dev`. Those routes go to the upstream, so UPSTREAM_URL moves them with the rest of /v1.
COPY docs/petstore.openapi.yaml ./docs/petstore.openapi.yaml
# Files stay root-owned (read-only to the process); the process runs as the image's unprivileged user `node`, named
# by its numeric id: Kubernetes' runAsNonRoot can only verify a numeric user, and refuses to start a named one.
USER 1000:1000
EXPOSE 8080
# The admin API, when admin.tokens (or TOLLGATE_ADMIN_TOKEN) is set; it listens on admin.host, 127.0.0.1 unless configured.
EXPOSE 8079
# Slim images have no curl: probe /healthz with Node's built-in fetch. PORT overrides the listening port.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 8080) + '/healthz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
ENTRYPOINT ["node", "dist/cli.js"]
CMD ["serve"]
