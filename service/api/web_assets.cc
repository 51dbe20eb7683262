#include "service/api/web_assets.h"

#include <httplib.h>

#include <map>
#include <string>

#include "service/api/errors.h"

namespace tfslurm::api {
namespace {

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// The page may load only what tfslurmd itself serves: no CDN, no inline
// script, nothing framed.
constexpr const char* kContentSecurityPolicy =
    "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'";

// True when the request's If-None-Match lists `etag` (or is "*").
bool NotModified(const httplib::Request& req, std::string_view etag) {
  if (!req.has_header("If-None-Match")) return false;
  std::string tags = req.get_header_value("If-None-Match");
  if (tags == "*") return true;
  size_t start = 0;
  while (start < tags.size()) {
    size_t comma = tags.find(',', start);
    std::string_view tag(tags.data() + start,
                         (comma == std::string::npos ? tags.size() : comma) - start);
    while (!tag.empty() && tag.front() == ' ') tag.remove_prefix(1);
    while (!tag.empty() && tag.back() == ' ') tag.remove_suffix(1);
    if (tag.starts_with("W/")) tag.remove_prefix(2);  // weak comparison is right for GET
    if (tag == etag) return true;
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return false;
}

void ServeAsset(const WebAsset& asset, const httplib::Request& req, httplib::Response& res) {
  res.set_header("ETag", std::string(asset.etag));
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Content-Type-Options", "nosniff");
  if (EndsWith(asset.path, ".html")) {
    res.set_header("Content-Security-Policy", kContentSecurityPolicy);
    res.set_header("X-Frame-Options", "DENY");
    res.set_header("Referrer-Policy", "no-referrer");
  }
  if (NotModified(req, asset.etag)) {
    res.status = 304;
    return;
  }
  res.set_content(asset.content.data(), asset.content.size(),
                  std::string(ContentTypeFor(asset.path)));
}

}  // namespace

std::string_view ContentTypeFor(std::string_view path) {
  static const std::pair<std::string_view, std::string_view> kTypes[] = {
      {".html", "text/html; charset=utf-8"},
      {".js", "text/javascript; charset=utf-8"},
      {".mjs", "text/javascript; charset=utf-8"},
      {".css", "text/css; charset=utf-8"},
      {".json", "application/json"},
      {".svg", "image/svg+xml"},
      {".png", "image/png"},
      {".ico", "image/x-icon"},
      {".txt", "text/plain; charset=utf-8"},
      {".md", "text/markdown; charset=utf-8"},
  };
  for (const auto& [ext, type] : kTypes)
    if (EndsWith(path, ext)) return type;
  return "application/octet-stream";
}

void RegisterWebAssetRoutes(httplib::Server& server, std::span<const WebAsset> assets) {
  // Built once; the handlers only read it.
  auto by_path = std::make_shared<std::map<std::string, const WebAsset*, std::less<>>>();
  for (const WebAsset& a : assets) (*by_path)[std::string(a.path)] = &a;

  server.Get("/", [by_path](const httplib::Request& req, httplib::Response& res) {
    auto it = by_path->find("index.html");
    if (it == by_path->end())
      return ReplyError(
          res, NotFound("this tfslurmd was built without the dashboard (web/ui/index.html)"));
    ServeAsset(*it->second, req, res);
  });
  server.Get(R"(/ui/([A-Za-z0-9._/-]+))",
             [by_path](const httplib::Request& req, httplib::Response& res) {
               auto it = by_path->find(req.matches[1].str());
               if (it == by_path->end())
                 return ReplyError(res, NotFound("no dashboard file '" + req.matches[1].str() +
                                                 "'; the dashboard starts at /"));
               ServeAsset(*it->second, req, res);
             });
}

}  // namespace tfslurm::api
