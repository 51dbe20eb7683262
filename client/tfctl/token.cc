// tfctl token create: a new API token for the caller (proved by MUNGE, or by
// the token tfctl sends), or, with an admin token, for another user.
#include <iostream>
#include <memory>

#include "client/tfctl/command.h"

namespace tfslurm::tfctl {
namespace {

struct TokenOptions {
  std::string user;
  bool admin = false;
};

int RunTokenCreate(const GlobalOptions& global, const TokenOptions& options) {
  auto client = Connect(global);
  if (!client) return kExitError;
  auto token = client->CreateToken(options.user, options.admin);
  if (!token.ok()) return Fail(token.status());
  std::cout << token->token << "\n";
  std::cerr << "token for " << token->user << (token->admin ? " (admin)" : "")
            << " created; it is shown only now: keep it as `token = ...` in "
               "~/.config/tfslurm/config, or in TFSLURM_TOKEN\n";
  return kExitOk;
}

}  // namespace

Command AddTokenCommand(CLI::App& app, const GlobalOptions& global) {
  auto options = std::make_shared<TokenOptions>();
  CLI::App* token = app.add_subcommand("token", "manage API tokens (for curl and the dashboard)");
  token->require_subcommand(1);
  CLI::App* create = token->add_subcommand(
      "create", "create a token; it is printed once, the service keeps only its hash");
  create->add_option("--user", options->user,
                     "the user the token acts as (default: you; another user: admins only)");
  create->add_flag("--admin", options->admin, "an admin token (admins only)");
  create->footer(
      "Without --token, tfctl proves your Unix user with a MUNGE credential, so a token "
      "for yourself needs no password.\n\n"
      "Example:\n"
      "  tfctl token create > ~/.tfslurm-token");
  return {token, [&global, options] { return RunTokenCreate(global, *options); }};
}

}  // namespace tfslurm::tfctl
