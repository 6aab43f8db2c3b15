/*
 * module.c -- loading modules: built-in ones by name from the table the
 * build generates, others from shared objects with dlopen.  A module built
 * for another ABI version, or without a descriptor, is refused with a message
 * that says what to do.
 */
#include "petrel-int.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const petrel_module_t *const *builtins;

void petrel__set_builtins(const petrel_module_t *const *table) { builtins = table; }

static int register_module(petrel_server_t *srv, const petrel_module_t *m, void *handle,
                           const char *args, char *err, size_t errlen)
{
    if (m->abi_version != PETREL_ABI_VERSION) {
        snprintf(err, errlen,
                 "module '%s' was built for petrel ABI version %d, this petrel has ABI version "
                 "%d: rebuild the module against this petrel's petrel.h",
                 m->name ? m->name : "?", m->abi_version, PETREL_ABI_VERSION);
        return PETREL_EINVAL;
    }
    for (int i = 0; i < srv->nmodules; i++)
        if (strcmp(srv->modules[i]->name, m->name) == 0) {
            snprintf(err, errlen, "module '%s' is loaded twice", m->name);
            return PETREL_ESTATE;
        }
    const petrel_module_t **mods =
        realloc(srv->modules, (size_t)(srv->nmodules + 1) * sizeof(*mods));
    void **handles = realloc(srv->module_handles, (size_t)(srv->nmodules + 1) * sizeof(void *));
    if (mods)
        srv->modules = mods;
    if (handles)
        srv->module_handles = handles;
    if (mods == NULL || handles == NULL)
        return PETREL_ENOMEM;
    srv->modules[srv->nmodules] = m;
    srv->module_handles[srv->nmodules] = handle;
    srv->nmodules++;
    for (const petrel_route_t *r = m->routes; r && r->pattern; r++) {
        int rc = petrel_route_add(srv, r->methods, r->pattern, r->handler, r->data);
        if (rc < 0) {
            snprintf(err, errlen, "module '%s': route '%s': %s", m->name, r->pattern,
                     rc == PETREL_ESTATE ? "already registered by another module"
                                         : petrel_strerror(rc));
            return rc;
        }
    }
    if (m->init) {
        int rc = m->init(srv, args ? args : "");
        if (rc < 0) {
            snprintf(err, errlen, "module '%s': init failed: %s", m->name, petrel_strerror(rc));
            return rc;
        }
    }
    return 0;
}

/* "NAME[:ARGS]" (built-in) or "PATH.so[:ARGS]" (a path: it has a '/'). */
int petrel__server_load_module(petrel_server_t *srv, const char *spec, char *err, size_t errlen)
{
    char name[1024];
    const char *slash = strrchr(spec, '/');
    const char *colon = strchr(slash ? slash : spec, ':');
    size_t nl = colon ? (size_t)(colon - spec) : strlen(spec);
    const char *args = colon ? colon + 1 : "";
    if (nl == 0 || nl >= sizeof(name)) {
        snprintf(err, errlen, "--module '%s': expected NAME or PATH.so, optionally :ARGS", spec);
        return PETREL_EINVAL;
    }
    memcpy(name, spec, nl);
    name[nl] = '\0';
    size_t len = strlen(name);
    bool is_path = strchr(name, '/') || (len > 3 && strcmp(name + len - 3, ".so") == 0);
    if (!is_path) {
        for (const petrel_module_t *const *b = builtins; b && *b; b++)
            if (strcmp((*b)->name, name) == 0)
                return register_module(srv, *b, NULL, args, err, errlen);
        char list[256] = "";
        size_t ln = 0;
        for (const petrel_module_t *const *b = builtins; b && *b && ln < sizeof(list) - 40; b++)
            ln += (size_t)snprintf(list + ln, sizeof(list) - ln, "%s%s", ln ? ", " : "",
                                   (*b)->name);
        snprintf(err, errlen,
                 "--module '%s': no built-in module of that name (built-in: %s; a module "
                 "file is given by its path, e.g. ./%s.so)",
                 name, list, name);
        return PETREL_ENOTFOUND;
    }
    char path[1040];
    /* dlopen() looks a bare file name up in the library path: "mod.so"
     * means the file in the current directory. */
    snprintf(path, sizeof(path), "%s%s", strchr(name, '/') ? "" : "./", name);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        snprintf(err, errlen, "--module '%s': cannot load: %s", name, dlerror());
        return PETREL_ENOTFOUND;
    }
    const petrel_module_t **entry = dlsym(h, "petrel_module_entry");
    if (entry == NULL || *entry == NULL) {
        snprintf(err, errlen,
                 "--module '%s': no module descriptor (petrel_module_entry): declare the module "
                 "with PETREL_MODULE(...) and include <petrel.h>",
                 name);
        dlclose(h);
        return PETREL_EINVAL;
    }
    int rc = register_module(srv, *entry, h, args, err, errlen);
    if (rc < 0 && (srv->nmodules == 0 || srv->module_handles[srv->nmodules - 1] != h))
        dlclose(h);
    return rc;
}
