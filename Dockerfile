# A server image: `grag serve` on port 8080 over the project mounted at /data (docs/install.md).
#
#   docker build -t grag .
#   docker run -p 8080:8080 -v "$PWD/my-project:/data" -e GRAG_API_KEYS=change-me grag
#
# Built in two stages: the first compiles grag from this tree and packs the Debian package
# (`make deb`'s rules); the second is Debian 12 with that package installed and nothing else but
# curl for the health check, run as an unprivileged user.

FROM debian:12 AS build
ARG JOBS=2
WORKDIR /src
# The build's dependencies, from the list scripts/setup.sh keeps (with nodejs and npm for the
# pinned vocabularies and web assets it fetches).
COPY scripts/setup.sh scripts/setup.sh
RUN apt-get update \
 && apt-get install -y --no-install-recommends nodejs npm \
 && bash scripts/setup.sh --build-only \
 && rm -rf /var/lib/apt/lists/*
COPY . .
RUN bash scripts/setup.sh --build-only \
 && cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGRAG_BUILD_TESTS=OFF \
      -DGRAG_BUILD_BENCH=OFF \
 && cmake --build /build -j "$JOBS" --target grag grag-serve grag_install_files grag_library \
 && cd /build && cpack -G DEB && mv grag_*.deb /grag.deb

FROM debian:12-slim
COPY --from=build /grag.deb /tmp/grag.deb
RUN apt-get update \
 && apt-get install -y --no-install-recommends /tmp/grag.deb curl ca-certificates \
 && rm -rf /var/lib/apt/lists/* /tmp/grag.deb \
 && useradd --system --create-home --home-dir /home/grag grag \
 && mkdir /data && chown grag:grag /data
USER grag
WORKDIR /data
VOLUME /data
ENV GRAG_ROOT=/data
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=5s CMD curl -fsS http://127.0.0.1:8080/health || exit 1
ENTRYPOINT ["grag", "serve", "--host", "0.0.0.0", "--port", "8080"]
