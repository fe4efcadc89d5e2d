# Controller side: why a node could not be reached or used, in one message that names the host and the
# inventory setting to fix. Reads the OpenSSH client's own messages (the ones ansible.builtin.ssh passes on)
# and the first play's access probe (mtslime.posttrain.node_access).
from __future__ import annotations

import re

from ansible_collections.mtslime.posttrain.plugins.plugin_utils.connection import container_exec


def _where(node):
    user = node.get("user")
    host = node.get("host") or node.get("name")
    port = node.get("port")
    return "%s%s%s" % ((user + "@") if user else "", host, (":%s" % port) if port else "")


def _jump(node):
    args = str(node.get("ssh_common_args") or "") + " " + str(node.get("ssh_extra_args") or "")
    found = re.search(r"ProxyJump[= ]+(\S+)|-J\s+(\S+)|ProxyCommand", args)
    if not found:
        return None
    return found.group(1) or found.group(2) or "the ProxyCommand"


def _ssh_advice(msg, node):
    """Advice for an OpenSSH client error, or None when the text is not one."""
    host = str(node.get("host") or node.get("name"))
    port = node.get("port") or 22
    jump = _jump(node)
    refused = re.search(r"connect to host (\S+) port (\d+): Connection refused", msg)
    if refused:
        if jump and refused.group(1) != host:
            return ("the jump host %s refused the connection (%s port %s): check the ProxyJump in "
                    "ansible_ssh_common_args and that sshd runs there" % (jump, refused.group(1), refused.group(2)))
        return ("nothing accepts SSH connections on %s port %s: check that sshd runs on the node and that "
                "ansible_port (now %s) is the port it listens on" % (refused.group(1), refused.group(2), port))
    if re.search(r"Could not resolve hostname (\S+)", msg):
        name = re.search(r"Could not resolve hostname (\S+?):", msg)
        return ("the name %s does not resolve: fix ansible_host (now %s), or the ProxyJump in "
                "ansible_ssh_common_args" % (name.group(1) if name else host, host))
    if re.search(r"timed out|No route to host|Network is unreachable|Connection closed by UNKNOWN", msg):
        via = (" through the jump host %s (ansible_ssh_common_args)" % jump) if jump else ""
        return ("%s port %s does not answer%s (node down, firewalled, or a wrong address): check ansible_host "
                "and ansible_port; a node behind a bastion needs ansible_ssh_common_args: -o ProxyJump=user@bastion"
                % (host, port, via))
    if "REMOTE HOST IDENTIFICATION HAS CHANGED" in msg or "Host key verification failed" in msg:
        known = "[%s]:%s" % (host, port) if str(port) != "22" else host
        return ("the node's SSH host key is not the one known for it (changed, or unknown with strict checking): "
                "if the node was reinstalled, check its new key fingerprint and remove the old one with "
                "ssh-keygen -R '%s', then rerun (host_key_checking stays on)" % known)
    if "UNPROTECTED PRIVATE KEY FILE" in msg or "bad permissions" in msg:
        return ("the private key file is readable by others and ssh ignores it: chmod 600 %s "
                "(ansible_ssh_private_key_file)" % (node.get("private_key_file") or "the key"))
    if re.search(r"no such identity|Load key .*: No such file", msg):
        return ("ansible_ssh_private_key_file (now %s) does not exist on the controller"
                % (node.get("private_key_file") or "unset"))
    if "Permission denied (" in msg or "Too many authentication failures" in msg:
        return ("the node refused the login of %s: check ansible_user (now %s) and ansible_ssh_private_key_file "
                "(now %s), and that the key's public half is in that user's ~/.ssh/authorized_keys on the node"
                % (node.get("user") or "the default user", node.get("user") or "unset",
                   node.get("private_key_file") or "unset: the SSH agent's or ~/.ssh keys are tried"))
    if "Connection closed" in msg or "Connection reset" in msg or "kex_exchange_identification" in msg:
        return ("the node closed the SSH connection before login (sshd refusing, overloaded, or not sshd on "
                "that port): check ansible_port (now %s) and the node's sshd log" % port)
    return None


def access_problem(result, node):
    """One message naming the node, where it was reached and what to fix, for the first play's access probe
    `result` (a registered result); None when the node is fine."""
    if not isinstance(result, dict):
        return None
    name = node.get("name") or node.get("host")
    where = _where(node)
    msg = str(result.get("msg") or "")
    if result.get("unreachable"):
        advice = _ssh_advice(msg, node) or (
            "check ansible_host, ansible_port, ansible_user, ansible_ssh_private_key_file and "
            "ansible_ssh_common_args")
        said = " ".join(msg.replace("Task failed: ", "").split())[:400]
        return "%s (%s): cannot connect over SSH: %s. [ssh said: %s]" % (name, where, advice, said)
    if result.get("failed"):
        text = " ".join((msg + " " + str(result.get("module_stderr") or "") + " " +
                         str(result.get("module_stdout") or "")).split())
        if re.search(r"(python[0-9.]*|interpreter).*(not found|No such file)", text, re.I):
            advice = ("no Python at ansible_python_interpreter (now %s) on the node: install python3 there or set "
                      "ansible_python_interpreter" % (node.get("python") or "discovered"))
        elif re.search(r"sudo.*password|Missing sudo password|a password is required", text, re.I):
            advice = ("become needs a sudo password: set ansible_become_password (or --ask-become-pass), or allow "
                      "passwordless sudo")
        else:
            advice = msg or text[:400]
        return "%s (%s): %s" % (name, where, advice)
    docker = result.get("docker") or {}
    if docker.get("required") and not docker.get("ok"):
        wrapper = container_exec.Wrapper(container="-", sudo=bool(docker.get("sudo")))
        advice = wrapper.problem(docker.get("rc", 1), docker.get("stdout", ""), docker.get("stderr", "")) or (
            "`%s` failed with rc %s: %s" % (" ".join(docker.get("cmd") or []), docker.get("rc"),
                                            " ".join(str(docker.get("stderr") or "").split())[:300]))
        return ("%s (%s): the training container is managed through the node's Docker as %s%s, which fails: %s"
                % (name, where, result.get("user") or node.get("user") or "the login user",
                   " with sudo -n (container_docker_sudo)" if docker.get("sudo") else "", advice))
    return None
