// ferryd-config-docs: writes or checks the documents made from ferryd's
// option table (config_docs.h). Not installed; `ninja -C build config-docs`
// runs it with --write, the ops test config-docs with --check.
//
//   ferryd-config-docs --check|--write conf FILE       the whole example ferryd.conf
//   ferryd-config-docs --check|--write man FILE        ferryd.8 between its markers
//   ferryd-config-docs --check|--write markdown FILE   docs/configuration.md between its markers
//
// Exit 0: up to date (or written); 1: FILE differs (the first differing
// line is printed) or cannot be read or written; 2: usage.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "daemon/config/config_docs.h"

namespace {

using namespace ferry::daemon;

bool read_file(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream s;
  s << in.rdbuf();
  *out = s.str();
  return true;
}

void first_difference(const std::string& have, const std::string& want) {
  std::istringstream a(have), b(want);
  std::string la, lb;
  for (int line = 1;; ++line) {
    const bool ga = static_cast<bool>(std::getline(a, la));
    const bool gb = static_cast<bool>(std::getline(b, lb));
    if (!ga && !gb) return;
    if (ga != gb || la != lb) {
      std::cerr << "  first difference at line " << line << ":\n    file:  " << (ga ? la : "(end of file)")
                << "\n    table: " << (gb ? lb : "(end of file)") << "\n";
      return;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: ferryd-config-docs --check|--write conf|man|markdown FILE\n";
    return 2;
  }
  const std::string mode = argv[1], kind = argv[2], path = argv[3];
  if (mode != "--check" && mode != "--write") return 2;
  std::string have;
  const bool exists = read_file(path, &have);
  std::string want;
  if (kind == "conf") {
    want = example_conf();
  } else if (kind == "man" || kind == "markdown") {
    if (!exists) {
      std::cerr << "ferryd-config-docs: cannot read " << path << "\n";
      return 1;
    }
    const Markers& m = kind == "man" ? kManMarkers : kMarkdownMarkers;
    if (const ferry::Error bad = splice(have, m, kind == "man" ? man_options() : reference_markdown(), &want);
        bad.failed()) {
      std::cerr << "ferryd-config-docs: " << path << " " << bad.message() << "\n";
      return 1;
    }
  } else {
    std::cerr << "ferryd-config-docs: unknown document '" << kind << "'\n";
    return 2;
  }
  if (mode == "--write") {
    if (exists && have == want) return 0;
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << want;
    if (!out.flush()) {
      std::cerr << "ferryd-config-docs: cannot write " << path << "\n";
      return 1;
    }
    std::cout << "wrote " << path << "\n";
    return 0;
  }
  if (exists && have == want) return 0;
  std::cerr << "ferryd-config-docs: " << path << " is out of date with ferryd's option table "
            << "(daemon/config/config_keys.cpp); run `ninja -C build config-docs` and commit the result\n";
  if (exists) first_difference(have, want);
  return 1;
}
