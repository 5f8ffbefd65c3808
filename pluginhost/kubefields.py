"""The field names of Kubernetes' core/v1 Pod, Node, PersistentVolumeClaim and PersistentVolume and
storage/v1 StorageClass and CSINode, type by type, as of k8s.io/api v0.35 (a pod's ``schedulingGroup``
as of v0.37).

Strict decoding (:mod:`pluginhost.decode`) reports a field this table does not list as unknown, as the
API server does under ``fieldValidation=Strict``. Fields Outrigger does not model (volumes, probes,
security contexts, status, managedFields, ...) are listed all the same: an object printed by ``kubectl
get -o yaml`` decodes without a word, and a misspelt field anywhere in it is named.

Each type is a string of its JSON field names: ``name`` for a field whose value is not an object (a
scalar, a list or map of scalars, or free-form JSON such as ``fieldsV1``), ``name:Type`` for an object,
``name:[Type]`` for a list of objects and ``name:{Type}`` for a map of objects. Inlined Go structs
(``VolumeSource`` in ``Volume``, ``EphemeralContainerCommon``, ...) are spelt out in place.
"""

from __future__ import annotations

__all__ = ["TYPES"]

TYPES: dict[str, str] = {
    "Pod": "kind apiVersion metadata:ObjectMeta spec:PodSpec status:PodStatus",
    "Node": "kind apiVersion metadata:ObjectMeta spec:NodeSpec status:NodeStatus",
    "PodTemplateSpec": "metadata:ObjectMeta spec:PodSpec",
    "ObjectReference": "kind namespace name uid apiVersion resourceVersion fieldPath",
    "ObjectMeta": (
        "name generateName namespace selfLink uid resourceVersion generation creationTimestamp deletionTimestamp "
        "deletionGracePeriodSeconds labels annotations ownerReferences:[OwnerReference] finalizers "
        "managedFields:[ManagedFieldsEntry]"
    ),
    "PodSpec": (
        "volumes:[Volume] initContainers:[Container] containers:[Container] "
        "ephemeralContainers:[EphemeralContainer] restartPolicy terminationGracePeriodSeconds activeDeadlineSeconds "
        "dnsPolicy nodeSelector serviceAccountName serviceAccount automountServiceAccountToken nodeName hostNetwork "
        "hostPID hostIPC shareProcessNamespace securityContext:PodSecurityContext "
        "imagePullSecrets:[LocalObjectReference] hostname subdomain affinity:Affinity schedulerName "
        "tolerations:[Toleration] hostAliases:[HostAlias] priorityClassName priority dnsConfig:PodDNSConfig "
        "readinessGates:[PodReadinessGate] runtimeClassName enableServiceLinks preemptionPolicy overhead "
        "topologySpreadConstraints:[TopologySpreadConstraint] setHostnameAsFQDN os:PodOS hostUsers "
        "schedulingGates:[PodSchedulingGate] resourceClaims:[PodResourceClaim] resources:ResourceRequirements "
        "hostnameOverride schedulingGroup:PodSchedulingGroup"
    ),
    "PodStatus": (
        "observedGeneration phase conditions:[PodCondition] message reason nominatedNodeName hostIP "
        "hostIPs:[HostIP] podIP podIPs:[PodIP] startTime initContainerStatuses:[ContainerStatus] "
        "containerStatuses:[ContainerStatus] qosClass ephemeralContainerStatuses:[ContainerStatus] resize "
        "resourceClaimStatuses:[PodResourceClaimStatus] extendedResourceClaimStatus:PodExtendedResourceClaimStatus "
        "allocatedResources resources:ResourceRequirements"
    ),
    "NodeSpec": "podCIDR podCIDRs providerID unschedulable taints:[Taint] configSource:NodeConfigSource externalID",
    "NodeStatus": (
        "capacity allocatable phase conditions:[NodeCondition] addresses:[NodeAddress] "
        "daemonEndpoints:NodeDaemonEndpoints nodeInfo:NodeSystemInfo images:[ContainerImage] volumesInUse "
        "volumesAttached:[AttachedVolume] config:NodeConfigStatus runtimeHandlers:[NodeRuntimeHandler] "
        "features:NodeFeatures declaredFeatures"
    ),
    "OwnerReference": "apiVersion kind name uid controller blockOwnerDeletion",
    "ManagedFieldsEntry": "manager operation apiVersion time fieldsType fieldsV1 subresource",
    "Volume": (
        "name hostPath:HostPathVolumeSource emptyDir:EmptyDirVolumeSource "
        "gcePersistentDisk:GCEPersistentDiskVolumeSource awsElasticBlockStore:AWSElasticBlockStoreVolumeSource "
        "gitRepo:GitRepoVolumeSource secret:SecretVolumeSource nfs:NFSVolumeSource iscsi:ISCSIVolumeSource "
        "glusterfs:GlusterfsVolumeSource persistentVolumeClaim:PersistentVolumeClaimVolumeSource "
        "rbd:RBDVolumeSource flexVolume:FlexVolumeSource cinder:CinderVolumeSource cephfs:CephFSVolumeSource "
        "flocker:FlockerVolumeSource downwardAPI:DownwardAPIVolumeSource fc:FCVolumeSource "
        "azureFile:AzureFileVolumeSource configMap:ConfigMapVolumeSource "
        "vsphereVolume:VsphereVirtualDiskVolumeSource quobyte:QuobyteVolumeSource azureDisk:AzureDiskVolumeSource "
        "photonPersistentDisk:PhotonPersistentDiskVolumeSource projected:ProjectedVolumeSource "
        "portworxVolume:PortworxVolumeSource scaleIO:ScaleIOVolumeSource storageos:StorageOSVolumeSource "
        "csi:CSIVolumeSource ephemeral:EphemeralVolumeSource image:ImageVolumeSource"
    ),
    "Container": (
        "name image command args workingDir ports:[ContainerPort] envFrom:[EnvFromSource] env:[EnvVar] "
        "resources:ResourceRequirements resizePolicy:[ContainerResizePolicy] restartPolicy "
        "restartPolicyRules:[ContainerRestartRule] volumeMounts:[VolumeMount] volumeDevices:[VolumeDevice] "
        "livenessProbe:Probe readinessProbe:Probe startupProbe:Probe lifecycle:Lifecycle terminationMessagePath "
        "terminationMessagePolicy imagePullPolicy securityContext:SecurityContext stdin stdinOnce tty"
    ),
    "EphemeralContainer": (
        "name image command args workingDir ports:[ContainerPort] envFrom:[EnvFromSource] env:[EnvVar] "
        "resources:ResourceRequirements resizePolicy:[ContainerResizePolicy] restartPolicy "
        "restartPolicyRules:[ContainerRestartRule] volumeMounts:[VolumeMount] volumeDevices:[VolumeDevice] "
        "livenessProbe:Probe readinessProbe:Probe startupProbe:Probe lifecycle:Lifecycle terminationMessagePath "
        "terminationMessagePolicy imagePullPolicy securityContext:SecurityContext stdin stdinOnce tty "
        "targetContainerName"
    ),
    "PodSecurityContext": (
        "seLinuxOptions:SELinuxOptions windowsOptions:WindowsSecurityContextOptions runAsUser runAsGroup "
        "runAsNonRoot supplementalGroups supplementalGroupsPolicy fsGroup sysctls:[Sysctl] fsGroupChangePolicy "
        "seccompProfile:SeccompProfile appArmorProfile:AppArmorProfile seLinuxChangePolicy"
    ),
    "LocalObjectReference": "name",
    "Affinity": "nodeAffinity:NodeAffinity podAffinity:PodAffinity podAntiAffinity:PodAntiAffinity",
    "Toleration": "key operator value effect tolerationSeconds",
    "HostAlias": "ip hostnames",
    "PodDNSConfig": "nameservers searches options:[PodDNSConfigOption]",
    "PodReadinessGate": "conditionType",
    "TopologySpreadConstraint": (
        "maxSkew topologyKey whenUnsatisfiable labelSelector:LabelSelector minDomains nodeAffinityPolicy "
        "nodeTaintsPolicy matchLabelKeys"
    ),
    "PodOS": "name",
    "PodSchedulingGate": "name",
    "PodResourceClaim": "name resourceClaimName resourceClaimTemplateName",
    "ResourceRequirements": "limits requests claims:[ResourceClaim]",
    # Replaces 1.35's workloadRef (WorkloadReference), tombstoned in 1.36.
    "PodSchedulingGroup": "podGroupName",
    "PodCondition": "type observedGeneration status lastProbeTime lastTransitionTime reason message",
    "HostIP": "ip",
    "PodIP": "ip",
    "ContainerStatus": (
        "name state:ContainerState lastState:ContainerState ready restartCount image imageID containerID started "
        "allocatedResources resources:ResourceRequirements volumeMounts:[VolumeMountStatus] user:ContainerUser "
        "allocatedResourcesStatus:[ResourceStatus] stopSignal"
    ),
    "PodResourceClaimStatus": "name resourceClaimName",
    "PodExtendedResourceClaimStatus": "requestMappings:[ContainerExtendedResourceRequest] resourceClaimName",
    "Taint": "key value effect timeAdded",
    "NodeConfigSource": "configMap:ConfigMapNodeConfigSource",
    "NodeCondition": "type status lastHeartbeatTime lastTransitionTime reason message",
    "NodeAddress": "type address",
    "NodeDaemonEndpoints": "kubeletEndpoint:DaemonEndpoint",
    "NodeSystemInfo": (
        "machineID systemUUID bootID kernelVersion osImage containerRuntimeVersion kubeletVersion kubeProxyVersion "
        "operatingSystem architecture swap:NodeSwapStatus"
    ),
    "ContainerImage": "names sizeBytes",
    "AttachedVolume": "name devicePath",
    "NodeConfigStatus": "assigned:NodeConfigSource active:NodeConfigSource lastKnownGood:NodeConfigSource error",
    "NodeRuntimeHandler": "name features:NodeRuntimeHandlerFeatures",
    "NodeFeatures": "supplementalGroupsPolicy",
    "HostPathVolumeSource": "path type",
    "EmptyDirVolumeSource": "medium sizeLimit",
    "GCEPersistentDiskVolumeSource": "pdName fsType partition readOnly",
    "AWSElasticBlockStoreVolumeSource": "volumeID fsType partition readOnly",
    "GitRepoVolumeSource": "repository revision directory",
    "SecretVolumeSource": "secretName items:[KeyToPath] defaultMode optional",
    "NFSVolumeSource": "server path readOnly",
    "ISCSIVolumeSource": (
        "targetPortal iqn lun iscsiInterface fsType readOnly portals chapAuthDiscovery chapAuthSession "
        "secretRef:LocalObjectReference initiatorName"
    ),
    "GlusterfsVolumeSource": "endpoints path readOnly",
    "PersistentVolumeClaimVolumeSource": "claimName readOnly",
    "RBDVolumeSource": "monitors image fsType pool user keyring secretRef:LocalObjectReference readOnly",
    "FlexVolumeSource": "driver fsType secretRef:LocalObjectReference readOnly options",
    "CinderVolumeSource": "volumeID fsType readOnly secretRef:LocalObjectReference",
    "CephFSVolumeSource": "monitors path user secretFile secretRef:LocalObjectReference readOnly",
    "FlockerVolumeSource": "datasetName datasetUUID",
    "DownwardAPIVolumeSource": "items:[DownwardAPIVolumeFile] defaultMode",
    "FCVolumeSource": "targetWWNs lun fsType readOnly wwids",
    "AzureFileVolumeSource": "secretName shareName readOnly",
    "ConfigMapVolumeSource": "name items:[KeyToPath] defaultMode optional",
    "VsphereVirtualDiskVolumeSource": "volumePath fsType storagePolicyName storagePolicyID",
    "QuobyteVolumeSource": "registry volume readOnly user group tenant",
    "AzureDiskVolumeSource": "diskName diskURI cachingMode fsType readOnly kind",
    "PhotonPersistentDiskVolumeSource": "pdID fsType",
    "ProjectedVolumeSource": "sources:[VolumeProjection] defaultMode",
    "PortworxVolumeSource": "volumeID fsType readOnly",
    "ScaleIOVolumeSource": (
        "gateway system secretRef:LocalObjectReference sslEnabled protectionDomain storagePool storageMode "
        "volumeName fsType readOnly"
    ),
    "StorageOSVolumeSource": "volumeName volumeNamespace fsType readOnly secretRef:LocalObjectReference",
    "CSIVolumeSource": "driver readOnly fsType volumeAttributes nodePublishSecretRef:LocalObjectReference",
    "EphemeralVolumeSource": "volumeClaimTemplate:PersistentVolumeClaimTemplate",
    "ImageVolumeSource": "reference pullPolicy",
    "ContainerPort": "name hostPort containerPort protocol hostIP",
    "EnvFromSource": "prefix configMapRef:ConfigMapEnvSource secretRef:SecretEnvSource",
    "EnvVar": "name value valueFrom:EnvVarSource",
    "ContainerResizePolicy": "resourceName restartPolicy",
    "ContainerRestartRule": "action exitCodes:ContainerRestartRuleOnExitCodes",
    "VolumeMount": "name readOnly recursiveReadOnly mountPath subPath mountPropagation subPathExpr bindMountOptions",
    "VolumeDevice": "name devicePath",
    "Probe": (
        "exec:ExecAction httpGet:HTTPGetAction tcpSocket:TCPSocketAction grpc:GRPCAction initialDelaySeconds "
        "timeoutSeconds periodSeconds successThreshold failureThreshold terminationGracePeriodSeconds"
    ),
    "Lifecycle": "postStart:LifecycleHandler preStop:LifecycleHandler stopSignal",
    "SecurityContext": (
        "capabilities:Capabilities privileged seLinuxOptions:SELinuxOptions "
        "windowsOptions:WindowsSecurityContextOptions runAsUser runAsGroup runAsNonRoot readOnlyRootFilesystem "
        "allowPrivilegeEscalation procMount seccompProfile:SeccompProfile appArmorProfile:AppArmorProfile"
    ),
    "SELinuxOptions": "user role type level",
    "WindowsSecurityContextOptions": "gmsaCredentialSpecName gmsaCredentialSpec runAsUserName hostProcess",
    "Sysctl": "name value",
    "SeccompProfile": "type localhostProfile",
    "AppArmorProfile": "type localhostProfile",
    "NodeAffinity": (
        "requiredDuringSchedulingIgnoredDuringExecution:NodeSelector "
        "preferredDuringSchedulingIgnoredDuringExecution:[PreferredSchedulingTerm]"
    ),
    "PodAffinity": (
        "requiredDuringSchedulingIgnoredDuringExecution:[PodAffinityTerm] "
        "preferredDuringSchedulingIgnoredDuringExecution:[WeightedPodAffinityTerm]"
    ),
    "PodAntiAffinity": (
        "requiredDuringSchedulingIgnoredDuringExecution:[PodAffinityTerm] "
        "preferredDuringSchedulingIgnoredDuringExecution:[WeightedPodAffinityTerm]"
    ),
    "PodDNSConfigOption": "name value",
    "LabelSelector": "matchLabels matchExpressions:[LabelSelectorRequirement]",
    "ResourceClaim": "name request",
    "ContainerState": "waiting:ContainerStateWaiting running:ContainerStateRunning terminated:ContainerStateTerminated",
    "VolumeMountStatus": "name mountPath readOnly recursiveReadOnly",
    "ContainerUser": "linux:LinuxContainerUser",
    "ResourceStatus": "name resources:[ResourceHealth]",
    "ContainerExtendedResourceRequest": "containerName resourceName requestName",
    "ConfigMapNodeConfigSource": "namespace name uid resourceVersion kubeletConfigKey",
    "DaemonEndpoint": "Port",
    "NodeSwapStatus": "capacity",
    "NodeRuntimeHandlerFeatures": "recursiveReadOnlyMounts userNamespaces",
    "KeyToPath": "key path mode",
    "DownwardAPIVolumeFile": "path fieldRef:ObjectFieldSelector resourceFieldRef:ResourceFieldSelector mode",
    "VolumeProjection": (
        "secret:SecretProjection downwardAPI:DownwardAPIProjection configMap:ConfigMapProjection "
        "serviceAccountToken:ServiceAccountTokenProjection clusterTrustBundle:ClusterTrustBundleProjection "
        "podCertificate:PodCertificateProjection"
    ),
    "PersistentVolumeClaimTemplate": "metadata:ObjectMeta spec:PersistentVolumeClaimSpec",
    "ConfigMapEnvSource": "name optional",
    "SecretEnvSource": "name optional",
    "EnvVarSource": (
        "fieldRef:ObjectFieldSelector resourceFieldRef:ResourceFieldSelector configMapKeyRef:ConfigMapKeySelector "
        "secretKeyRef:SecretKeySelector fileKeyRef:FileKeySelector"
    ),
    "ContainerRestartRuleOnExitCodes": "operator values",
    "ExecAction": "command",
    "HTTPGetAction": "path port host scheme httpHeaders:[HTTPHeader]",
    "TCPSocketAction": "port host",
    "GRPCAction": "port service",
    "LifecycleHandler": "exec:ExecAction httpGet:HTTPGetAction tcpSocket:TCPSocketAction sleep:SleepAction",
    "Capabilities": "add drop",
    "NodeSelector": "nodeSelectorTerms:[NodeSelectorTerm]",
    "PreferredSchedulingTerm": "weight preference:NodeSelectorTerm",
    "PodAffinityTerm": (
        "labelSelector:LabelSelector namespaces topologyKey namespaceSelector:LabelSelector matchLabelKeys "
        "mismatchLabelKeys"
    ),
    "WeightedPodAffinityTerm": "weight podAffinityTerm:PodAffinityTerm",
    "LabelSelectorRequirement": "key operator values",
    "ContainerStateWaiting": "reason message",
    "ContainerStateRunning": "startedAt",
    "ContainerStateTerminated": "exitCode signal reason message startedAt finishedAt containerID",
    "LinuxContainerUser": "uid gid supplementalGroups",
    "ResourceHealth": "resourceID health",
    "ObjectFieldSelector": "apiVersion fieldPath",
    "ResourceFieldSelector": "containerName resource divisor",
    "SecretProjection": "name items:[KeyToPath] optional",
    "DownwardAPIProjection": "items:[DownwardAPIVolumeFile]",
    "ConfigMapProjection": "name items:[KeyToPath] optional",
    "ServiceAccountTokenProjection": "audience expirationSeconds path",
    "ClusterTrustBundleProjection": "name signerName labelSelector:LabelSelector optional path",
    "PodCertificateProjection": (
        "signerName keyType maxExpirationSeconds credentialBundlePath keyPath certificateChainPath userAnnotations"
    ),
    "PersistentVolumeClaimSpec": (
        "accessModes selector:LabelSelector resources:VolumeResourceRequirements volumeName storageClassName "
        "volumeMode dataSource:TypedLocalObjectReference dataSourceRef:TypedObjectReference "
        "volumeAttributesClassName"
    ),
    "ConfigMapKeySelector": "name key optional",
    "SecretKeySelector": "name key optional",
    "FileKeySelector": "volumeName path key optional",
    "HTTPHeader": "name value",
    "SleepAction": "seconds",
    "NodeSelectorTerm": "matchExpressions:[NodeSelectorRequirement] matchFields:[NodeSelectorRequirement]",
    "VolumeResourceRequirements": "limits requests",
    "TypedLocalObjectReference": "apiGroup kind name",
    "TypedObjectReference": "apiGroup kind name namespace",
    "NodeSelectorRequirement": "key operator values",
    "ListMeta": "selfLink resourceVersion continue remainingItemCount",
    # core/v1 PersistentVolumeClaim and PersistentVolume (PersistentVolumeSource inlined in the spec).
    "PersistentVolumeClaim": (
        "kind apiVersion metadata:ObjectMeta spec:PersistentVolumeClaimSpec status:PersistentVolumeClaimStatus"
    ),
    "PersistentVolumeClaimStatus": (
        "phase accessModes capacity conditions:[PersistentVolumeClaimCondition] allocatedResources "
        "allocatedResourceStatuses currentVolumeAttributesClassName modifyVolumeStatus:ModifyVolumeStatus"
    ),
    "PersistentVolumeClaimCondition": "type status lastProbeTime lastTransitionTime reason message",
    "ModifyVolumeStatus": "targetVolumeAttributesClassName status",
    "PersistentVolume": "kind apiVersion metadata:ObjectMeta spec:PersistentVolumeSpec status:PersistentVolumeStatus",
    "PersistentVolumeSpec": (
        "capacity gcePersistentDisk:GCEPersistentDiskVolumeSource "
        "awsElasticBlockStore:AWSElasticBlockStoreVolumeSource hostPath:HostPathVolumeSource "
        "glusterfs:GlusterfsPersistentVolumeSource nfs:NFSVolumeSource rbd:RBDPersistentVolumeSource "
        "iscsi:ISCSIPersistentVolumeSource cinder:CinderPersistentVolumeSource cephfs:CephFSPersistentVolumeSource "
        "fc:FCVolumeSource flocker:FlockerVolumeSource flexVolume:FlexPersistentVolumeSource "
        "azureFile:AzureFilePersistentVolumeSource vsphereVolume:VsphereVirtualDiskVolumeSource "
        "quobyte:QuobyteVolumeSource azureDisk:AzureDiskVolumeSource "
        "photonPersistentDisk:PhotonPersistentDiskVolumeSource portworxVolume:PortworxVolumeSource "
        "scaleIO:ScaleIOPersistentVolumeSource local:LocalVolumeSource "
        "storageos:StorageOSPersistentVolumeSource csi:CSIPersistentVolumeSource accessModes "
        "claimRef:ObjectReference persistentVolumeReclaimPolicy storageClassName mountOptions volumeMode "
        "nodeAffinity:VolumeNodeAffinity volumeAttributesClassName"
    ),
    "PersistentVolumeStatus": "phase message reason lastPhaseTransitionTime",
    "VolumeNodeAffinity": "required:NodeSelector",
    "GlusterfsPersistentVolumeSource": "endpoints path readOnly endpointsNamespace",
    "RBDPersistentVolumeSource": "monitors image fsType pool user keyring secretRef:SecretReference readOnly",
    "ISCSIPersistentVolumeSource": (
        "targetPortal iqn lun iscsiInterface fsType readOnly portals chapAuthDiscovery chapAuthSession "
        "secretRef:SecretReference initiatorName"
    ),
    "CinderPersistentVolumeSource": "volumeID fsType readOnly secretRef:SecretReference",
    "CephFSPersistentVolumeSource": "monitors path user secretFile secretRef:SecretReference readOnly",
    "FlexPersistentVolumeSource": "driver fsType secretRef:SecretReference readOnly options",
    "AzureFilePersistentVolumeSource": "secretName shareName readOnly secretNamespace",
    "ScaleIOPersistentVolumeSource": (
        "gateway system secretRef:SecretReference sslEnabled protectionDomain storagePool storageMode volumeName "
        "fsType readOnly"
    ),
    "LocalVolumeSource": "path fsType",
    "StorageOSPersistentVolumeSource": "volumeName volumeNamespace fsType readOnly secretRef:ObjectReference",
    "CSIPersistentVolumeSource": (
        "driver volumeHandle readOnly fsType volumeAttributes controllerPublishSecretRef:SecretReference "
        "nodeStageSecretRef:SecretReference nodePublishSecretRef:SecretReference "
        "controllerExpandSecretRef:SecretReference nodeExpandSecretRef:SecretReference"
    ),
    "SecretReference": "name namespace",
    # storage.k8s.io/v1 StorageClass and CSINode.
    "StorageClass": (
        "kind apiVersion metadata:ObjectMeta provisioner parameters reclaimPolicy mountOptions allowVolumeExpansion "
        "volumeBindingMode allowedTopologies:[TopologySelectorTerm]"
    ),
    "TopologySelectorTerm": "matchLabelExpressions:[TopologySelectorLabelRequirement]",
    "TopologySelectorLabelRequirement": "key values",
    "CSINode": "kind apiVersion metadata:ObjectMeta spec:CSINodeSpec",
    "CSINodeSpec": "drivers:[CSINodeDriver]",
    "CSINodeDriver": "name nodeID topologyKeys allocatable:VolumeNodeResources",
    "VolumeNodeResources": "count",
}
