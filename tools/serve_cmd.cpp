// shadergrad serve — a tiny static server for web bundles and the example pages (examples/web/): files under DIR
// over HTTP on 127.0.0.1 (never another interface), with the MIME types ES modules, WebAssembly and WGSL need
// (a module script served as text/plain is refused by browsers), no directory traversal (cpp-httplib's mount
// point rejects paths that leave DIR; we also refuse symlinks that point outside it), cross-origin isolation
// headers (COOP/COEP, so pages may use SharedArrayBuffer and precise timers) and no caching (a re-exported bundle
// is seen on reload). The HTTP parsing is cpp-httplib's (Debian libcpp-httplib-dev).
#include "serve_cmd.h"

#include <sys/socket.h>

#include <csignal>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <httplib.h>

#include "sg/error.h"

namespace sg::cli {

namespace fs = std::filesystem;

namespace {

const std::map<std::string, const char*>& mime_table() {
  static const std::map<std::string, const char*> t = {
      {"html", "text/html; charset=utf-8"},        {"htm", "text/html; charset=utf-8"},
      {"js", "text/javascript; charset=utf-8"},    {"mjs", "text/javascript; charset=utf-8"},
      {"css", "text/css; charset=utf-8"},          {"json", "application/json"},
      {"wasm", "application/wasm"},                {"wgsl", "text/wgsl; charset=utf-8"},
      {"frag", "text/plain; charset=utf-8"},       {"comp", "text/plain; charset=utf-8"},
      {"ts", "text/plain; charset=utf-8"},         {"md", "text/markdown; charset=utf-8"},
      {"txt", "text/plain; charset=utf-8"},        {"csv", "text/csv; charset=utf-8"},
      {"png", "image/png"},                        {"svg", "image/svg+xml"},
      {"ico", "image/x-icon"},                     {"safetensors", "application/octet-stream"},
      {"bin", "application/octet-stream"},
  };
  return t;
}

httplib::Server* g_server = nullptr;
extern "C" void stop_server(int) {
  if (g_server) g_server->stop();
}

int serve(const std::string& dir, int port) {
  std::error_code ec;
  const fs::path root = fs::weakly_canonical(fs::path(dir), ec);
  if (ec || !fs::is_directory(root))
    throw IOError(fmt::format("shadergrad serve: '{}' is not a directory (give the folder holding the page or the "
                              "bundle, e.g. the --out of shadergrad export)", dir));
  httplib::Server srv;
  // SO_REUSEADDR only: cpp-httplib's default also sets SO_REUSEPORT, which lets a second server bind a port that
  // is in use (requests then go to either); without it a taken port fails to bind and we say so
  srv.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  for (auto& [ext, type] : mime_table()) srv.set_file_extension_and_mimetype_mapping(ext, type);
  srv.set_default_headers({{"Cross-Origin-Opener-Policy", "same-origin"},
                           {"Cross-Origin-Embedder-Policy", "require-corp"},
                           {"Cache-Control", "no-store"}});
  // Idle connections (a browser's pre-opened sockets, a stalled client) each hold a worker until their read times
  // out: with cpp-httplib's defaults (8 workers on 2 cores, 5 s) 8 idle connections delayed every request by
  // 3.7 s and 64 blocked it. 64 workers and 1 s read and keep-alive timeouts keep a page's requests flowing.
  srv.new_task_queue = [] { return new httplib::ThreadPool(64); };
  srv.set_read_timeout(1);
  srv.set_keep_alive_timeout(1);
  // a symlink inside DIR may point anywhere: serve only files whose real path stays under DIR
  srv.set_pre_routing_handler([root](const httplib::Request& req, httplib::Response& res) {
    // a decoded NUL ("/index.html%00.js") would open index.html and label it by the ".js" after the NUL
    if (req.path.find('\0') != std::string::npos) {
      res.status = 400;
      res.set_content("bad request: the path holds a NUL byte (%00)\n", "text/plain");
      return httplib::Server::HandlerResponse::Handled;
    }
    fs::path rel = fs::path(req.path).relative_path();
    std::error_code e;
    fs::path real = fs::weakly_canonical(root / rel, e);
    const std::string r = real.string(), base = root.string();
    if (e || (r != base && r.rfind(base + "/", 0) != 0)) {
      res.status = 403;
      res.set_content("forbidden: the path leaves the served directory\n", "text/plain");
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  if (!srv.set_mount_point("/", root.string()))
    throw IOError(fmt::format("shadergrad serve: cannot serve '{}'", root.string()));
  srv.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (res.body.empty()) res.set_content(fmt::format("{} {}\n", res.status, req.path), "text/plain");
  });
  const char* host = "127.0.0.1";
  int bound = port;
  if (port == 0) {
    bound = srv.bind_to_any_port(host);
    if (bound < 0) throw IOError("shadergrad serve: cannot bind any port on 127.0.0.1");
  } else if (!srv.bind_to_port(host, port)) {
    throw IOError(fmt::format("shadergrad serve: cannot listen on 127.0.0.1:{}: the port is taken by another "
                              "program (or needs privileges below 1024); pick another with --port N, or --port 0 "
                              "for any free port", port));
  }
  std::cout << fmt::format("serving {} at http://127.0.0.1:{}/ (Ctrl-C stops)", root.string(), bound) << std::endl;
  g_server = &srv;
  std::signal(SIGINT, stop_server);
  std::signal(SIGTERM, stop_server);
  const bool ok = srv.listen_after_bind();
  g_server = nullptr;
  return ok ? 0 : 1;
}

}  // namespace

const char* content_type_for(const std::string& path) {
  const std::string ext = fs::path(path).extension().string();
  auto it = mime_table().find(ext.empty() ? ext : ext.substr(1));
  return it == mime_table().end() ? "application/octet-stream" : it->second;
}

Subcommand add_serve_command(CLI::App& app) {
  auto dir = std::make_shared<std::string>();
  auto port = std::make_shared<int>(8000);
  CLI::App* s = app.add_subcommand("serve", "serve a directory (a web bundle, the example pages) over HTTP on "
                                            "127.0.0.1 with the MIME types ES modules, WebAssembly and WGSL need");
  s->add_option("dir", *dir, "directory to serve")->required();
  s->add_option("--port", *port, "TCP port on 127.0.0.1 (default 8000; 0 = any free port, printed)")
      ->check(CLI::Range(0, 65535));
  Subcommand cmd;
  cmd.sub = s;
  cmd.run = [dir, port]() { return serve(*dir, *port); };
  return cmd;
}

}  // namespace sg::cli
