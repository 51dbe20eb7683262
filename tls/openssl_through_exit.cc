#include "tls/openssl_through_exit.h"

#include <openssl/crypto.h>

namespace tfslurm::tls {

void KeepOpenSslThroughExit() { OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, nullptr); }

}  // namespace tfslurm::tls
